-- Pauses as a protocol: per-execution metadata (declared client tools, the script runtime that
-- journaled the execution) and a small key/value table for server-wide checks (the sealing key's
-- check value shared by replicas).

ALTER TABLE executions ADD COLUMN meta TEXT;

CREATE TABLE settings (
    key         TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);
