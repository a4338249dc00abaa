-- Ranking reads postings instead of scoring candidate passages with ts_rank:
-- each (revision, lexeme) row of knowledge_terms now also lists the passages
-- holding the lexeme, with what BM25F needs of each, in four aligned arrays
-- (passage order). A question's postings are a few index lookups, and no
-- passage is read to rank it.
ALTER TABLE knowledge_terms
    -- The passages holding the lexeme, by ordinal.
    ADD COLUMN ordinals     integer[],
    -- Its occurrences in each (positions in the tsvector).
    ADD COLUMN counts       smallint[],
    -- Those of them in the revision's title (weight A).
    ADD COLUMN title_counts smallint[],
    -- Each passage's length in words.
    ADD COLUMN lengths      integer[];

UPDATE knowledge_terms k
SET ordinals = p.ordinals, counts = p.counts, title_counts = p.title_counts, lengths = p.lengths
FROM (
    SELECT p.revision_id, t.lexeme,
           array_agg(p.ordinal ORDER BY p.ordinal) AS ordinals,
           array_agg(cardinality(t.positions)::smallint ORDER BY p.ordinal) AS counts,
           array_agg(cardinality(array_positions(t.weights, 'A'))::smallint ORDER BY p.ordinal) AS title_counts,
           array_agg(p.tokens ORDER BY p.ordinal) AS lengths
    FROM knowledge_passages p, unnest(p.search) AS t
    GROUP BY p.revision_id, t.lexeme
) p
WHERE k.revision_id = p.revision_id AND k.lexeme = p.lexeme;

ALTER TABLE knowledge_terms
    ALTER COLUMN ordinals SET NOT NULL,
    ALTER COLUMN counts SET NOT NULL,
    ALTER COLUMN title_counts SET NOT NULL,
    ALTER COLUMN lengths SET NOT NULL;

-- A question's document frequencies are read from the index alone, however
-- many words it has (the arrays made the rows wide).
ALTER TABLE knowledge_terms
    DROP CONSTRAINT knowledge_terms_pkey,
    ADD CONSTRAINT knowledge_terms_pkey PRIMARY KEY (agent_id, language, lexeme, revision_id) INCLUDE (passages);

-- Nothing searches the passages' tsvector any more: ranking reads the
-- postings, and answers fetch passages by key.
DROP INDEX knowledge_passages_search;
