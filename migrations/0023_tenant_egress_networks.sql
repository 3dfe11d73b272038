-- Private networks a tenant's endpoints may reach, assigned by the operator per
-- tenant (CIDRs as text, checked when set): the operator-wide
-- HOOKGATE_EGRESS_ALLOW_NETWORKS opens a range to every tenant and every portal
-- link, this to one tenant only. Empty by default: closed.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS egress_allow_networks text[] NOT NULL DEFAULT '{}';
