-- Model endpoints added at runtime (`toolshed models add`), beside `[models.<id>]` of the
-- configuration. `sealed` holds the key and headers, sealed with the server's secret key.

CREATE TABLE models (
    id             TEXT PRIMARY KEY,
    kind           TEXT NOT NULL,
    base_url       TEXT,
    sealed         TEXT NOT NULL,
    timeout_ms     BIGINT NOT NULL,
    allow_private  BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
