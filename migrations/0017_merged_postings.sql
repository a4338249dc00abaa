-- Postings merged per Agent, language and word (issue 23, part 1).
--
-- Until now a question read one knowledge_terms row per (word, revision): a
-- common word of an Agent of 100,000 small sources was 20,000 rows, and its
-- document frequency and the Agent's passage count were sums over as many.
-- Now an active revision is a *document* with a number; the worker that
-- promotes it writes its knowledge_terms rows as before (the document is
-- *fresh*), and a merge in the background (knowledge::merge) moves the
-- postings of many fresh documents into one *segment*: one row per word with
-- every posting of the segment's documents in one array (their number,
-- passage, counts and length; knowledge::postings has the encoding). Segments
-- are merged with each other as a binary counter does, so an Agent has a few
-- segments (about log2 of its documents over 256), and a word costs a few rows
-- whatever the number of sources.
--
-- Retiring a revision (replaced, deleted) writes a *mask* with its number and
-- sizes in the transaction that retires it: ranking drops the masked
-- document's postings and subtracts its sizes until a merge rewrites its
-- segment without it and drops document and mask together. No statement of a
-- promotion or a retirement updates a row another one writes: promotions of
-- one Agent never wait for each other, and merges (one per Agent at a time,
-- under an advisory lock) never wait for a row lock.

-- An indexed revision: active, or retired and masked until its segment is
-- merged.
CREATE TABLE knowledge_documents (
    number      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    revision_id uuid NOT NULL UNIQUE REFERENCES knowledge_revisions (id),
    source_id   uuid NOT NULL,
    agent_id    uuid NOT NULL,
    language    agent_language NOT NULL,
    -- Its passages with an indexable word, and their words (BM25's N and
    -- mean length).
    passages    integer NOT NULL,
    tokens      bigint NOT NULL,
    -- NULL while fresh: its postings are its knowledge_terms rows.
    segment_id  bigint
);

CREATE INDEX knowledge_documents_fresh ON knowledge_documents (agent_id)
    INCLUDE (language, passages, tokens) WHERE segment_id IS NULL;
CREATE INDEX knowledge_documents_segment ON knowledge_documents (segment_id) WHERE segment_id IS NOT NULL;
CREATE INDEX knowledge_documents_agent ON knowledge_documents (agent_id);

-- Merged documents of one Agent and language, with their sizes.
CREATE TABLE knowledge_segments (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id   uuid NOT NULL,
    language   agent_language NOT NULL,
    documents  integer NOT NULL,
    passages   bigint NOT NULL,
    tokens     bigint NOT NULL
);

CREATE INDEX knowledge_segments_agent ON knowledge_segments (agent_id, language)
    INCLUDE (documents, passages, tokens);

-- A word's postings in one segment, and the passages holding it there.
CREATE TABLE knowledge_segment_terms (
    agent_id   uuid NOT NULL,
    language   agent_language NOT NULL,
    lexeme     text NOT NULL,
    segment_id bigint NOT NULL,
    passages   integer NOT NULL,
    postings   bytea NOT NULL,
    PRIMARY KEY (agent_id, language, lexeme, segment_id) INCLUDE (passages)
);

CREATE INDEX knowledge_segment_terms_segment ON knowledge_segment_terms (segment_id);
-- Already compact (varints): stored out of line as they are, read without
-- decompressing.
ALTER TABLE knowledge_segment_terms ALTER COLUMN postings SET STORAGE EXTERNAL;

-- Retired documents whose postings are still stored (fresh or in a segment).
CREATE TABLE knowledge_masks (
    number    bigint PRIMARY KEY,
    agent_id  uuid NOT NULL,
    language  agent_language NOT NULL,
    passages  integer NOT NULL,
    tokens    bigint NOT NULL
);

CREATE INDEX knowledge_masks_agent ON knowledge_masks (agent_id) INCLUDE (language, passages, tokens);

-- Active revisions indexed before this migration become fresh documents; the
-- worker merges them (its sweep finds Agents with many fresh documents).
INSERT INTO knowledge_documents (revision_id, source_id, agent_id, language, passages, tokens)
SELECT id, source_id, agent_id, language, passages, tokens
FROM knowledge_revisions
WHERE state = 'active' AND language IS NOT NULL
ORDER BY agent_id, imported_at, id;
