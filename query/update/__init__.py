"""Update operators, replacement documents and upserts, with MongoDB's rules and errors.

    u = compile_update({"$inc": {"n": 1}, "$push": {"tags": "x"}}, array_filters=None)
    new_doc, modified = u.apply(doc, matched_position=pos)     # doc is not changed
    u.upsert_document(filter_spec)                            # the document an upsert inserts

`validate_document_for_storage(doc)` checks a document about to be inserted.
A pipeline-style update (a list of `$set`/`$unset`/`$project`/`$replaceWith`... stages)
compiles the same way: ``compile_update([...], variables=CommandVariables(...),
constants=stmt_c)``; its result replaces the document.
"""

from query.update.core import Update, compile_update
from query.update.upsert import upsert_seed
from query.update.validate import validate_document_for_storage

__all__ = ["Update", "compile_update", "upsert_seed", "validate_document_for_storage"]
