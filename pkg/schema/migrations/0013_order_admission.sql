-- 0013: the admission each order's reservation spent.
--
-- On a queued sale the gateway lets a shopper buy only with an admission
-- token, and an admission buys once: the reserve script adds the token's id
-- to the sale's spent set in Redis, in the same step as the reservation.
-- That set lived only in Redis, so after a Redis loss a shopper whose
-- order had ended (expired, cancelled) could buy again with the same
-- admission (SECURITY.md, gap 11). The event now carries the admission's
-- id, the consumer keeps it here, and the load or repair that rebuilds a
-- sale's hot copy from PostgreSQL puts back every admission an order was
-- placed with. NULL for unqueued sales and for orders placed before this
-- column.
--
-- A nullable column with no default rewrites nothing. Its check is added
-- NOT VALID, so this lock is held for no table scan; 0014 validates the
-- existing rows (all NULL) under a lock that lets orders be written.
ALTER TABLE flash_sale_order ADD COLUMN IF NOT EXISTS admission_id text;
ALTER TABLE flash_sale_order
    ADD CONSTRAINT flash_sale_order_admission_id
    CHECK (admission_id IS NULL OR length(admission_id) BETWEEN 1 AND 64) NOT VALID;
