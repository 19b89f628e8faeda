-- 0003: payment confirmations. A payment reference settles one order: the
-- same reference repeated on that order is an idempotent retry, on another
-- order it is refused (one payment cannot pay for two units).
ALTER TABLE flash_sale_order
    ADD CONSTRAINT flash_sale_order_payment_ref_len
    CHECK (payment_ref IS NULL OR length(payment_ref) BETWEEN 1 AND 128);
CREATE UNIQUE INDEX flash_sale_order_payment_ref
    ON flash_sale_order (payment_ref) WHERE payment_ref IS NOT NULL;
