-- Browsers post directly: each write key lists the web origins (scheme://host[:port])
-- allowed to send with it. A key with none is server-only: a request carrying an
-- Origin header is refused with it.
ALTER TABLE write_keys ADD COLUMN allowed_origins text[] NOT NULL DEFAULT '{}';
