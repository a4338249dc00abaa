"""Checks the paraphrase set's promise.

A content word is a token of the lower-cased text (runs of letters and digits;
apostrophes and hyphens split words) that is not in the English stop-word list
below (NLTK's 179-word list), reduced by the Snowball English stemmer
(PyStemmer). Title and text of a passage both count.

- every `paraphrase` query shares no content word with any of its relevant
  passages (grade 1 or 2);
- every `lexical` query shares at least one content word with each of its
  grade-2 passages;
- ids and grades are consistent (every judged passage exists, grades are 1 or 2,
  every query is judged).

Needs `pip install PyStemmer`. Usage: check.py [DATASET_DIR] (default: this
file's folder). Exits 1 on any violation.
"""
import json
import os
import re
import sys

import Stemmer

STOP = set("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours
yourself yourselves he him his himself she she's her hers herself it it's its
itself they them their theirs themselves what which who whom this that that'll
these those am is are was were be been being have has had having do does did
doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in
out on off over under again further then once here there when where why how all
any both each few more most other some such no nor not only own same so than too
very s t can will just don don't should should've now d ll m o re ve y ain aren
aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven
haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't
shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())
STEM = Stemmer.Stemmer("english")


def content_words(text):
    words = re.findall(r"[^\W_]+", text.lower())
    return {STEM.stemWord(w) for w in words if w not in STOP}


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    docs = {}
    for line in open(f"{folder}/corpus.jsonl"):
        if line.strip():
            d = json.loads(line)
            docs[d["_id"]] = content_words(d.get("title", "") + " " + d["text"])
    queries = [json.loads(l) for l in open(f"{folder}/queries.jsonl") if l.strip()]
    judged = {}
    lines = open(f"{folder}/qrels/test.tsv").read().splitlines()
    for line in lines[1:]:
        q, d, g = line.split("\t")
        judged.setdefault(q, {})[d] = int(g)
    bad = 0
    kinds = {}
    for q in queries:
        kind = q.get("kind")
        kinds[kind] = kinds.get(kind, 0) + 1
        rel = judged.get(q["_id"], {})
        if not rel:
            print(f"UNJUDGED {q['_id']}")
            bad += 1
        qw = content_words(q["text"])
        for d, g in rel.items():
            if d not in docs:
                print(f"MISSING {q['_id']} -> {d}")
                bad += 1
                continue
            if g not in (1, 2):
                print(f"GRADE {q['_id']} -> {d}: {g}")
                bad += 1
            shared = qw & docs[d]
            if kind == "paraphrase" and shared:
                print(f"SHARED {q['_id']} -> {d}: {sorted(shared)}  ({q['text']})")
                bad += 1
            if kind == "lexical" and g == 2 and not shared:
                print(f"NO-OVERLAP {q['_id']} -> {d}  ({q['text']})")
                bad += 1
        if kind not in ("paraphrase", "lexical"):
            print(f"KIND {q['_id']}: {kind!r}")
            bad += 1
    print(f"{len(docs)} passages; queries: {kinds}; violations: {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
