-- Retrieval by meaning (svc_search::vectors): every passage's vector, kept as
-- its postings are. A fresh document's vectors are one row; a merge gathers a
-- segment's into one row. Each row names the model that made its vectors, and
-- each Agent answers with one model at a time (knowledge_vector_models), so a
-- model change can embed an Agent anew beside the vectors that answer, then
-- switch in one transaction. Rows are never updated: an API process keeps the
-- ones it read. Additive: a release before this one writes no vectors, and
-- its documents answer by their words until they are embedded.
CREATE TABLE knowledge_document_vectors (
    number  bigint NOT NULL REFERENCES knowledge_documents (number) ON DELETE CASCADE,
    model   text NOT NULL,
    vectors bytea NOT NULL,
    PRIMARY KEY (number, model)
);

CREATE TABLE knowledge_segment_vectors (
    segment_id bigint NOT NULL REFERENCES knowledge_segments (id) ON DELETE CASCADE,
    model      text NOT NULL,
    vectors    bytea NOT NULL,
    PRIMARY KEY (segment_id, model)
);

CREATE TABLE knowledge_vector_models (
    agent_id uuid PRIMARY KEY,
    model    text NOT NULL
);

-- What a passage's vector is made of besides its own text (svc_search::passage_text):
-- a model change embeds the passages anew from the index alone.
ALTER TABLE knowledge_documents ADD COLUMN title text;

-- Vectors are int8 already: compressing them gains nothing and costs every
-- merge's write. Stored out of line, uncompressed.
ALTER TABLE knowledge_document_vectors ALTER COLUMN vectors SET STORAGE EXTERNAL;
ALTER TABLE knowledge_segment_vectors ALTER COLUMN vectors SET STORAGE EXTERNAL;
