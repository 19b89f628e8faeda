-- 0012: signed payment confirmations refused for good.
--
-- The payment provider confirms a payment the shopper made; the order
-- service refuses it when the order cannot be paid any more (expired,
-- cancelled, paid under another reference, rejected, unknown). The
-- provider has taken the money and the order will not be paid: someone
-- must refund it, or honour it by hand. Until now that was a log line and
-- a counter, which rotate away; each row here is one such confirmation,
-- kept until it is settled: by an operator (POST
-- /admin/payments/refused/settle: refunded or honoured), or by the same
-- confirmation accepted later (paid). A confirmation the provider sends
-- again counts as an attempt of the same row. A reference that paid
-- another order (PAYMENT_REF_USED) is a row of its own beside that
-- order's payment: the key is the reference and the order together.
CREATE TABLE payment_refused (
    payment_ref text        NOT NULL CHECK (length(payment_ref) BETWEEN 1 AND 128),
    order_id    uuid        NOT NULL,
    code        text        NOT NULL,
    refused_at  timestamptz NOT NULL DEFAULT now(),
    last_at     timestamptz NOT NULL DEFAULT now(),
    attempts    integer     NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    settled_at  timestamptz,
    resolution  text        CHECK (resolution IN ('refunded', 'honoured', 'paid')),
    PRIMARY KEY (payment_ref, order_id),
    CHECK ((settled_at IS NULL) = (resolution IS NULL))
);
CREATE INDEX payment_refused_open ON payment_refused (refused_at) WHERE settled_at IS NULL;
