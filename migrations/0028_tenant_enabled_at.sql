-- When a tenant was last enabled again after being disabled. The workers' sweep
-- of deliveries paused while their tenant was disabled looks only at tenants
-- enabled again in the last two minutes; it went by `updated_at` before, which
-- every change and every new tenant sets, and so read all of such a tenant's
-- deliveries every five seconds in each worker (81 ms a time for a tenant with
-- 60,000, in the bench) without finding any.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS enabled_at timestamptz;
