-- 0001: sales, items, orders and the stock-release outbox.
CREATE TABLE flash_sale (
    id          bigserial PRIMARY KEY,
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz NOT NULL,
    payment_ttl interval    NOT NULL DEFAULT interval '10 minutes' CHECK (payment_ttl > interval '0'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at)
);

CREATE TABLE flash_sale_item (
    id         bigserial PRIMARY KEY,
    sale_id    bigint        NOT NULL REFERENCES flash_sale (id),
    product_id text          NOT NULL,
    name       text          NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    price      numeric(12,2) NOT NULL CHECK (price >= 0),
    quantity   integer       NOT NULL CHECK (quantity >= 0),
    -- units held by active (PENDING or PAID) orders; the safety net under Redis
    sold       integer       NOT NULL DEFAULT 0,
    CHECK (sold BETWEEN 0 AND quantity)
);
CREATE INDEX flash_sale_item_sale ON flash_sale_item (sale_id);

CREATE TABLE flash_sale_order (
    id            uuid        PRIMARY KEY,
    sale_id       bigint      NOT NULL REFERENCES flash_sale (id),
    item_id       bigint      NOT NULL REFERENCES flash_sale_item (id),
    user_id       text        NOT NULL CHECK (length(user_id) BETWEEN 1 AND 128),
    status        text        NOT NULL CHECK (status IN ('PENDING', 'PAID', 'EXPIRED', 'CANCELLED', 'REJECTED')),
    created_at    timestamptz NOT NULL,
    persisted_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    paid_at       timestamptz,
    payment_ref   text,
    closed_at     timestamptz,
    reject_reason text
);
-- One active order per user per sale. Over active orders only, so a shopper
-- whose order expired or was cancelled can buy again.
CREATE UNIQUE INDEX flash_sale_order_one_active
    ON flash_sale_order (sale_id, user_id) WHERE status IN ('PENDING', 'PAID');
CREATE INDEX flash_sale_order_pending_expiry
    ON flash_sale_order (expires_at) WHERE status = 'PENDING';
CREATE INDEX flash_sale_order_item_status ON flash_sale_order (item_id, status);
CREATE INDEX flash_sale_order_user ON flash_sale_order (user_id);

-- Outbox of units to give back to Redis. A row is written in the same
-- transaction that ends an order (reject, expiry, cancel) and drained by the
-- relay only after commit, so a crash in between is repaired on restart and a
-- unit is returned once (the release script is keyed by order id).
CREATE TABLE stock_release (
    order_id    uuid        PRIMARY KEY REFERENCES flash_sale_order (id),
    sale_id     bigint      NOT NULL,
    item_id     bigint      NOT NULL,
    user_id     text        NOT NULL,
    reason      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    released_at timestamptz,
    outcome     text
);
CREATE INDEX stock_release_pending ON stock_release (created_at) WHERE released_at IS NULL;
