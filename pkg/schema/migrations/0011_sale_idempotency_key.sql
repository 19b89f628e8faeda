-- 0011: a sale created with an idempotency key is created once.
--
-- An operator's script that retries POST /admin/sales after a lost answer
-- (a timeout, a dropped connection) made a second sale with the same items:
-- two sales to load, to sell and to reconcile, and shoppers split between
-- them. With an Idempotency-Key header (CLI: --idempotency-key) the retry
-- gets the sale the first call made; the same key with another request is
-- refused. request_digest is the SHA-256 of the decoded request
-- (ordersvc/internal/store.RequestDigest), so a retry that spells the same
-- sale differently (whitespace, key order) is still the same request.
--
-- Both columns are NULL for a sale made without a key, and UNIQUE lets any
-- number of NULLs through.
ALTER TABLE flash_sale
    ADD COLUMN idempotency_key text UNIQUE
        CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
    ADD COLUMN request_digest bytea
        CHECK ((idempotency_key IS NULL) = (request_digest IS NULL));
