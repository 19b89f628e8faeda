-- 0004: per-sale lookups (audit, reconcile, load-stock, the outbox of one
-- sale) no longer scan every order of every sale.
CREATE INDEX flash_sale_order_sale_status ON flash_sale_order (sale_id, status);
CREATE INDEX stock_release_sale_pending ON stock_release (sale_id) WHERE released_at IS NULL;
