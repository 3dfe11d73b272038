-- Whether deliveries also carry the svix-id/-timestamp/-signature aliases (SPEC §4).
ALTER TABLE tenants ADD COLUMN svix_headers boolean NOT NULL DEFAULT true;
