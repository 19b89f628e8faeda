-- 0009: check the orders written before 0008 against its foreign key. A
-- migration of its own, so its lock (SHARE UPDATE EXCLUSIVE) is the only
-- one held while every order is read: the consumer keeps writing orders.
ALTER TABLE flash_sale_order VALIDATE CONSTRAINT flash_sale_order_item_of_sale;
