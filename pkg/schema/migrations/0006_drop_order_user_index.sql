-- 0006: no query reads orders by user alone. The one-active-order index
-- (sale_id, user_id) answers every per-shopper lookup; this index was the
-- largest on the table (103 MB of 480 on the development database, 293
-- scans in a day against 21 million on the primary key) and one more
-- B-tree insert for every order the consumer writes. Without it,
-- BenchmarkPersistBatch wrote 6 % more orders per second (A B B A).
DROP INDEX IF EXISTS flash_sale_order_user;
