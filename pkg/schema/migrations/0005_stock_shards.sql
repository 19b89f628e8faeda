-- 0005: how many Redis shards hold each item's stock. 1 keeps every key of
-- the sale in one hash slot; more spread the hot item over cluster nodes.
-- Fixed for a sale's life: a shopper's shard is derived from it.
ALTER TABLE flash_sale
    ADD COLUMN stock_shards integer NOT NULL DEFAULT 1 CHECK (stock_shards BETWEEN 1 AND 64);
