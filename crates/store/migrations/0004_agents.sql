-- Agent definitions: one row per agent (which version is the draft, which is live) and every
-- version of its JSON definition. Edits add a draft version; publishing points `live_version`
-- at the draft.

CREATE TABLE agents (
    name           TEXT PRIMARY KEY,
    draft_version  BIGINT NOT NULL,
    live_version   BIGINT,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

CREATE TABLE agent_versions (
    name        TEXT NOT NULL,
    version     BIGINT NOT NULL,
    config      TEXT NOT NULL,
    author      TEXT NOT NULL,
    note        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);
