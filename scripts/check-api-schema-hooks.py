"""schemathesis hooks of scripts/check-api-schema.

One check, `schema_valid_requests_are_accepted`, replaces schemathesis's own
`positive_data_acceptance`: a request generated from the document as valid must
not be refused, except for the rules no JSON Schema can state. Those are listed
below, each as narrowly as the response lets us tell them apart: the status, the
problem code and, for `invalid_request`, `details.reason` (and `details.rule`),
never a whole status code. Anything else refused is a rule the document should
declare (or a server defect), and fails the run.

Statuses that say nothing about the input's shape pass as schemathesis's own
check lets them: 401 and 403 (the credential or its role or scope), 404 (a
generated id names nothing), 409 (state: an archived Workspace, an idempotency
key reused with another input) and 429. A 5xx is left to `not_a_server_error`.
"""

import hashlib
import itertools
import os
import re

import schemathesis

# (status, code, reason or None, rule or None) -> why no schema can state it.
UNSTATEABLE = {
    # Confirmations: `confirm` must equal the id being deleted (or be `true`),
    # and `widget.configure` must list the origins it drops. They depend on the
    # other fields' values and on what is stored.
    (428, "confirmation_required", None, None): "a confirmation of a destructive change",
    # Cursors are opaque tokens the server made for an earlier page.
    (400, "invalid_request", "invalid_cursor", None): "a cursor is the server's own token",
    # Uniqueness against what is stored.
    (400, "invalid_request", "slug_taken", None): "a slug already taken",
    (400, "invalid_request", "key_exists", None): "a source key already in use by a live source",
    # `digest` must be the SHA-256 of `content`: a relation between two fields.
    (400, "invalid_request", "digest_mismatch", None): "a digest that is not the content's",
    # Keys of a manifest's entries are unique; `uniqueItems` compares whole items.
    (400, "invalid_request", "duplicate_key", None): "two manifest entries with one key",
    # State of a stored key: rotating or revoking one already revoked.
    (400, "invalid_request", "api_key_revoked", None): "an API key already revoked",
    # The host of a URL or an origin as the URL standard parses it (IDNA, IPv4
    # numbers, IPv6 groups): the declared pattern bounds the characters only.
    (400, "invalid_request", "invalid_url", "malformed"): "a host the URL standard refuses",
    (400, "invalid_request", "invalid_origin", "invalid_host"): "a host the URL standard refuses",
    # `widget.verify` asks the Agent a question: with no active knowledge or no
    # language model, the answer fails; that is the Agent's state, not the input.
    (422, "processing_failed", None, None): "the Agent could not answer",
}


def _problem(response):
    try:
        error = response.json()["error"]
    except Exception:
        return None, None, None
    details = error.get("details") or {}
    return error.get("code"), details.get("reason"), details.get("rule")


@schemathesis.check
def schema_valid_requests_are_accepted(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    # A coverage case varying one parameter can still carry a negative body.
    if any(not component.mode.is_positive for component in meta.components.values()):
        return None
    try:
        from schemathesis.specs.openapi.checks import is_unexpected_http_status_case

        if is_unexpected_http_status_case(case):
            return None
    except ImportError:
        pass
    status = response.status_code
    if status < 400 or status in (401, 403, 404, 409, 429) or status >= 500:
        return None
    code, reason, rule = _problem(response)
    for key in ((status, code, reason, rule), (status, code, reason, None), (status, code, None, None)):
        if key in UNSTATEABLE:
            return None
    raise AssertionError(
        f"Schema-valid request rejected: {status} {code}"
        f" (reason {reason}, rule {rule}): {response.text[:600]}"
    )


# Two values no schema can make right, set before each call so that requests
# reach the operation's logic instead of stopping at the same refusal (the
# engine revalidates a case a hook edits, so its positive or negative mode
# stays true):
# - `digest` becomes the SHA-256 of `content` (only where both are already
#   valid strings), so knowledge sources get added, replaced and reconciled;
# - `idempotencyKey` becomes a fresh key of the same length (only a valid
#   one), so a generator that repeats `00000000` does not turn every later
#   call into `idempotency_conflict`.
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_RUN = os.environ.get("CHECK_API_SCHEMA_RUN", "r")[:1]
_fresh = itertools.count(1)


def _match_digest(entry):
    content, digest = entry.get("content"), entry.get("digest")
    if isinstance(content, str) and isinstance(digest, str) and _DIGEST.match(digest):
        try:
            entry["digest"] = "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()
        except UnicodeEncodeError:
            pass


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if not isinstance(body, dict):
        return
    key = body.get("idempotencyKey")
    if isinstance(key, str) and 8 <= len(key) <= 200 and "\0" not in key:
        body["idempotencyKey"] = f"{_RUN}{next(_fresh):x}".rjust(len(key), "k")
    _match_digest(body)
    manifest = body.get("manifest")
    if isinstance(manifest, dict) and isinstance(manifest.get("sources"), list):
        for entry in manifest["sources"]:
            if isinstance(entry, dict):
                _match_digest(entry)
