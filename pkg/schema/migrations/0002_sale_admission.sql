-- 0002: per-sale admission settings read by the gateways.
ALTER TABLE flash_sale
    -- shoppers need an admission token from the virtual queue to buy
    ADD COLUMN queue_enabled  boolean NOT NULL DEFAULT false,
    -- early joiners are ordered by a random draw at the opening, not by arrival
    ADD COLUMN queue_draw     boolean NOT NULL DEFAULT true,
    -- shoppers admitted per second at the start; operators change it live
    ADD COLUMN admission_rate integer NOT NULL DEFAULT 100 CHECK (admission_rate >= 0),
    -- leading zero bits of the proof of work asked to join the queue (0 = none)
    ADD COLUMN pow_difficulty integer NOT NULL DEFAULT 0 CHECK (pow_difficulty BETWEEN 0 AND 32);
