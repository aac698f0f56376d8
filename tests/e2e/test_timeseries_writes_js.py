"""Time-series writes from mongosh and the Node.js driver: findOneAndUpdate/Replace/Delete
(findAndModify), the collection's bulkWrite (insert, update and delete commands) and the
client's bulkWrite (the bulkWrite command), with the stored measurements read back
afterwards."""

from __future__ import annotations

import pytest

from .mongosh_util import run_mongosh
from .node_driver import run_node

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


NODE_BODY = """
  const c = client;
  const d = c.db('ts_writes_node');
  await d.dropDatabase();
  await d.createCollection('m', { timeseries: { timeField: 't', metaField: 'k' } });
  const m = d.collection('m');
  const T = Date.UTC(2024, 0, 1);
  const at = (i) => new Date(T + i * 60000);
  await m.insertMany([0, 1, 2, 3].map(i => ({ _id: i, t: at(i), k: i % 2, v: i })));
  const out = {};
  out.before = await m.findOneAndUpdate({ k: 0, v: { $gt: 0 } }, { $inc: { v: 10 } },
                                        { projection: { _id: 1, v: 1 } });
  out.upserted = await m.findOneAndUpdate({ k: 'new' }, { $set: { t: at(9) } },
                                          { upsert: true, returnDocument: 'after',
                                            projection: { _id: 0, k: 1 } });
  out.deleted = await m.findOneAndDelete({ _id: 1 }, { projection: { _id: 1 } });
  try { await m.findOneAndUpdate({}, { $set: { x: 1 } }, { sort: { t: 1 } }); }
  catch (e) { out.sortRefused = e.code; }
  const res = await c.bulkWrite([
    { name: 'insertOne', namespace: 'ts_writes_node.m', document: { _id: 5, t: at(5), k: 1, v: 5 } },
    { name: 'updateMany', namespace: 'ts_writes_node.m', filter: { k: 1 }, update: { $set: { seen: true } } },
    { name: 'deleteOne', namespace: 'ts_writes_node.m', filter: { _id: 0 } },
  ], { verboseResults: true });
  out.client = { inserted: res.insertedCount, matched: res.matchedCount,
                 modified: res.modifiedCount, deleted: res.deletedCount,
                 updates: Object.fromEntries([...res.updateResults].map(
                   ([i, r]) => [i, [r.matchedCount, r.modifiedCount]])) };
  try {
    await c.bulkWrite([
      { name: 'insertOne', namespace: 'ts_writes_node.m', document: { _id: 6, k: 1 } },
      { name: 'insertOne', namespace: 'ts_writes_node.m', document: { _id: 7, t: at(7), k: 1 } },
    ], { ordered: false });
  } catch (e) {
    out.clientErrors = [...e.writeErrors].map(([i, w]) => [i, w.code]);
  }
  out.docs = await m.find({ _id: { $type: 'number' } }, { projection: { t: 0 } })
                    .sort({ _id: 1 }).toArray();
  out.valid = (await d.command({ validate: 'system.buckets.m' })).valid;
  await d.dropDatabase();
  return out;
"""


@pytest.mark.mongosh
def test_node_driver_time_series_writes(uri: str) -> None:
    out = run_node(uri, NODE_BODY)
    assert out == {
        "before": {"_id": 2, "v": 2},
        "upserted": {"k": "new"},
        "deleted": {"_id": 1},
        "sortRefused": 72,
        "client": {"inserted": 1, "matched": 2, "modified": 2, "deleted": 1,
                   "updates": {"1": [2, 2]}},
        "clientErrors": [[0, 2]],
        "docs": [{"_id": 2, "k": 0, "v": 12}, {"_id": 3, "k": 1, "v": 3, "seen": True},
                 {"_id": 5, "k": 1, "v": 5, "seen": True}, {"_id": 7, "k": 1}],
        "valid": True,
    }
