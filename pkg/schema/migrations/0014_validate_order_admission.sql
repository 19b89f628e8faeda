-- 0014: check the orders written before 0013 against its admission_id
-- check. A migration of its own, so its lock (SHARE UPDATE EXCLUSIVE) is the
-- only one held while every order is read: the consumer keeps writing.
ALTER TABLE flash_sale_order VALIDATE CONSTRAINT flash_sale_order_admission_id;
