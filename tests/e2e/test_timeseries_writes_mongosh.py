"""Time-series writes from mongosh: findOneAndUpdate/Replace/Delete (findAndModify), the
collection's bulkWrite (insert, update and delete commands) and the client's bulkWrite
(the bulkWrite command), with the stored measurements read back afterwards."""

from __future__ import annotations

import pytest

from .mongosh_util import run_mongosh

SCRIPT = r"""
const d = db.getSiblingDB('ts_writes_shell'); d.dropDatabase();
d.createCollection('m', {timeseries: {timeField: 't', metaField: 'k'}});
const T = new Date('2024-01-01T00:00:00Z');
const at = (i) => new Date(T.getTime() + i * 60000);
d.m.insertMany([0, 1, 2, 3].map(i => ({_id: i, t: at(i), k: i % 2, v: i})));
const out = {};
out.updated = d.m.findOneAndUpdate({v: {$gte: 2}, k: 1}, {$set: {w: 1}},
                                   {returnDocument: 'after', projection: {_id: 1, w: 1}});
out.replaced = d.m.findOneAndReplace({k: 9}, {_id: 9, t: at(9), k: 9}, {upsert: true,
                                      returnDocument: 'after', projection: {t: 0}});
out.deleted = d.m.findOneAndDelete({v: 0}, {projection: {_id: 0, v: 1}});
try { d.m.findOneAndDelete({}, {sort: {v: 1}}); } catch (e) { out.sortRefused = e.code; }
try { d.m.findOneAndUpdate({_id: 1}, {$unset: {t: ''}}); } catch (e) { out.noTime = e.code; }
const bw = d.m.bulkWrite([
  {insertOne: {document: {_id: 10, t: at(10), k: 0, v: 10}}},
  {updateMany: {filter: {k: 0}, update: {$inc: {v: 1}}}},
  {deleteOne: {filter: {_id: 1}}}]);
out.collection = {inserted: bw.insertedCount, matched: bw.matchedCount,
                  modified: bw.modifiedCount, deleted: bw.deletedCount};
const cbw = db.getMongo().bulkWrite([
  {name: 'insertOne', namespace: 'ts_writes_shell.m', document: {_id: 20, t: at(20), k: 2, v: 20}},
  {name: 'updateOne', namespace: 'ts_writes_shell.m', filter: {_id: 20}, update: {$set: {v: 21}}},
  {name: 'deleteOne', namespace: 'ts_writes_shell.m', filter: {_id: 9}}], {verboseResults: true});
out.client = {inserted: cbw.insertedCount, matched: cbw.matchedCount, deleted: cbw.deletedCount,
              updates: Object.fromEntries(cbw.updateResults)};
out.docs = d.m.find({}, {_id: 1, k: 1, v: 1, w: 1}).sort({_id: 1}).toArray();
out.valid = d.runCommand({validate: 'system.buckets.m'}).valid;
print(EJSON.stringify(out, {relaxed: true}));
d.dropDatabase();
"""


@pytest.mark.mongosh
def test_mongosh_time_series_writes(uri: str) -> None:
    result, _ = run_mongosh(uri, SCRIPT)
    assert result == {
        "updated": {"_id": 3, "w": 1},
        "replaced": {"_id": 9, "k": 9},
        "deleted": {"v": 0},
        "sortRefused": 72,
        "noTime": 2,
        "collection": {"inserted": 1, "matched": 2, "modified": 2, "deleted": 1},
        "client": {"inserted": 1, "matched": 1, "deleted": 1,
                   "updates": {"1": {"matchedCount": 1, "modifiedCount": 1,
                                     "didUpsert": False}}},
        "docs": [{"_id": 2, "k": 0, "v": 3}, {"_id": 3, "k": 1, "v": 3, "w": 1},
                 {"_id": 10, "k": 0, "v": 11}, {"_id": 20, "k": 2, "v": 21}],
        "valid": True,
    }
