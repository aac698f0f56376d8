"""Aggregation stages with the MongoDB manual's examples
(https://www.mongodb.com/docs/manual/reference/operator/aggregation/<stage>/)."""

from __future__ import annotations

import pytest
from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS

from query.context import PipelineContext
from query.pipeline import compile_pipeline
from storage.errors import MongoError

pytest.importorskip("query.sort", reason="needs the query.sort module (query-match branch)")


def d(s: str) -> DatetimeMS:
    from datetime import UTC, datetime
    return DatetimeMS(round(datetime.fromisoformat(s.replace("Z", "+00:00"))
                            .astimezone(UTC).timestamp() * 1000))


def run(stages: list[dict], docs: list[dict], ctx: PipelineContext | None = None) -> list[dict]:
    return list(compile_pipeline(stages, ctx).run(docs))


CLOTHING = [
    {"_id": 1, "item": "Shirt", "sizes": ["S", "M", "L"]},
    {"_id": 2, "item": "Shorts", "sizes": []},
    {"_id": 3, "item": "Hat", "sizes": "M"},
    {"_id": 4, "item": "Gloves"},
    {"_id": 5, "item": "Scarf", "sizes": None},
]


def test_unwind() -> None:
    # unwind/: default, preserveNullAndEmptyArrays, includeArrayIndex
    out = run([{"$unwind": "$sizes"}], CLOTHING)
    assert [(o["_id"], o["sizes"]) for o in out] == [(1, "S"), (1, "M"), (1, "L"), (3, "M")]
    out = run([{"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": True}}], CLOTHING)
    assert out[3:] == [{"_id": 2, "item": "Shorts"}, {"_id": 3, "item": "Hat", "sizes": "M"},
                       {"_id": 4, "item": "Gloves"},
                       {"_id": 5, "item": "Scarf", "sizes": None}]
    out = run([{"$unwind": {"path": "$sizes", "includeArrayIndex": "arrayIndex"}}], CLOTHING)
    assert [(o["sizes"], o["arrayIndex"]) for o in out] == \
        [("S", Int64(0)), ("M", Int64(1)), ("L", Int64(2)), ("M", None)]
    assert type(out[0]["arrayIndex"]) is Int64
    # nested path; arrays of arrays unwind one level
    out = run([{"$unwind": "$a.b"}], [{"a": {"b": [[1, 2], 3]}, "x": 1}])
    assert out == [{"a": {"b": [1, 2]}, "x": 1}, {"a": {"b": 3}, "x": 1}]


def test_count_and_limit_skip() -> None:
    # count/: scores greater than 80
    scores = [{"subject": "History", "score": s} for s in (88, 92, 97, 71, 79, 83)]
    assert run([{"$match": {"score": {"$gt": 80}}}, {"$count": "passing_scores"}], scores) == \
        [{"passing_scores": 4}]
    assert run([{"$count": "n"}], []) == []
    assert run([{"$skip": 2}, {"$limit": 2}], scores) == scores[2:4]


def test_add_fields_and_set() -> None:
    # addFields/: totals, then a total of totals
    scores = [{"_id": 1, "student": "Maya", "homework": [10, 5, 10], "quiz": [10, 8],
               "extraCredit": 0},
              {"_id": 2, "student": "Ryan", "homework": [5, 6, 5], "quiz": [8, 8],
               "extraCredit": 8}]
    out = run([{"$addFields": {"totalHomework": {"$sum": "$homework"},
                               "totalQuiz": {"$sum": "$quiz"}}},
               {"$addFields": {"totalScore": {"$add": ["$totalHomework", "$totalQuiz",
                                                       "$extraCredit"]}}}], scores)
    assert [(o["totalHomework"], o["totalQuiz"], o["totalScore"]) for o in out] == \
        [(25, 18, 43), (16, 16, 40)]
    # Adding fields to an embedded document (dotted path and nested object merge the same)
    vehicles = [{"_id": 1, "type": "car", "specs": {"doors": 4, "wheels": 4}},
                {"_id": 2, "type": "motorcycle", "specs": {"doors": 0, "wheels": 2}},
                {"_id": 3, "type": "jet ski"}]
    expected = [{"_id": 1, "type": "car", "specs": {"doors": 4, "wheels": 4,
                                                     "fuel_type": "unleaded"}},
                {"_id": 2, "type": "motorcycle", "specs": {"doors": 0, "wheels": 2,
                                                           "fuel_type": "unleaded"}},
                {"_id": 3, "type": "jet ski", "specs": {"fuel_type": "unleaded"}}]
    assert run([{"$addFields": {"specs.fuel_type": "unleaded"}}], vehicles) == expected
    assert run([{"$set": {"specs": {"fuel_type": "unleaded"}}}], vehicles) == expected
    # Overwriting a field, replacing _id, removing with $$REMOVE, adding to an array
    animals = [{"_id": 1, "dogs": 10, "cats": 15}]
    assert run([{"$addFields": {"cats": 20}}], animals) == [{"_id": 1, "dogs": 10, "cats": 20}]
    assert run([{"$addFields": {"_id": "$dogs", "dogs": "$$REMOVE"}}], animals) == \
        [{"_id": 10, "cats": 15}]
    assert run([{"$addFields": {"homework": {"$concatArrays": ["$homework", [7]]}}}],
               scores[:1])[0]["homework"] == [10, 5, 10, 7]
    # a path through an array sets the field in every element; scalars become documents
    assert run([{"$set": {"a.b": 1}}], [{"a": [{"c": 1}, 2, [{"d": 1}]]}]) == \
        [{"a": [{"c": 1, "b": 1}, {"b": 1}, [{"d": 1, "b": 1}]]}]
    # input documents are not modified
    assert vehicles[2] == {"_id": 3, "type": "jet ski"}


def test_unset() -> None:
    # unset/: top-level, several, embedded (through an array of documents)
    books = [{"_id": 1, "title": "Antelope Antics", "isbn": "0000000010",
              "author": {"last": "An", "first": "Auntie"},
              "copies": [{"warehouse": "A", "qty": 5}, {"warehouse": "B", "qty": 15}]}]
    assert "copies" not in run([{"$unset": "copies"}], books)[0]
    out = run([{"$unset": ["isbn", "author.first", "copies.warehouse"]}], books)[0]
    assert out == {"_id": 1, "title": "Antelope Antics", "author": {"last": "An"},
                   "copies": [{"qty": 5}, {"qty": 15}]}
    assert books[0]["author"] == {"last": "An", "first": "Auntie"}


def test_replace_root_and_replace_with() -> None:
    # replaceRoot/: $mergeObjects with defaults; replaceWith/ the same
    people = [{"_id": 1, "name": "Arlene", "age": 34, "pets": {"dogs": 2, "cats": 1}},
              {"_id": 2, "name": "Sam", "age": 41, "pets": {"cats": 1, "fish": 3}},
              {"_id": 3, "name": "Maria", "age": 25}]
    spec = {"$mergeObjects": [{"dogs": 0, "cats": 0, "birds": 0, "fish": 0}, "$pets"]}
    expected = [{"dogs": 2, "cats": 1, "birds": 0, "fish": 0},
                {"dogs": 0, "cats": 1, "birds": 0, "fish": 3},
                {"dogs": 0, "cats": 0, "birds": 0, "fish": 0}]
    assert run([{"$replaceRoot": {"newRoot": spec}}], people) == expected
    assert run([{"$replaceWith": spec}], people) == expected
    with pytest.raises(MongoError) as e:
        run([{"$replaceRoot": {"newRoot": "$name"}}], people)
    assert e.value.code == 40228


def test_redact() -> None:
    # redact/: the forecasts example, user access ["STLW", "G"]
    forecast = {"_id": 1, "title": "123 Department Report", "tags": ["G", "STLW"], "year": 2014,
                "subsections": [
                    {"subtitle": "Section 1: Overview", "tags": ["SI", "G"],
                     "content": "Section 1: This is the content of section 1."},
                    {"subtitle": "Section 2: Analysis", "tags": ["STLW"],
                     "content": "Section 2: This is the content of section 2."},
                    {"subtitle": "Section 3: Budgeting", "tags": ["TK"],
                     "content": {"text": "Section 3: This is the content of section3.",
                                 "tags": ["HCS"]}}]}
    out = run([{"$match": {"year": 2014}},
               {"$redact": {"$cond": {"if": {"$gt": [{"$size": {"$setIntersection": [
                   "$tags", ["STLW", "G"]]}}, 0]}, "then": "$$DESCEND", "else": "$$PRUNE"}}}],
              [forecast])
    assert out == [{**forecast, "subsections": forecast["subsections"][:2]}]
    assert run([{"$redact": "$$KEEP"}], [forecast]) == [forecast]
    assert run([{"$redact": "$$PRUNE"}], [forecast]) == []
    with pytest.raises(MongoError) as e:
        run([{"$redact": "x"}], [forecast])
    assert e.value.code == 17053


def test_sort_by_count_and_sort() -> None:
    # sortByCount/: counts per tag, descending
    docs = [{"tags": ["painting", "oil"]}, {"tags": ["painting"]}, {"tags": ["painting", "ink"]},
            {"tags": ["oil"]}]
    assert run([{"$unwind": "$tags"}, {"$sortByCount": "$tags"}], docs)[:2] == \
        [{"_id": "painting", "count": 3}, {"_id": "oil", "count": 2}]
    assert [o["_id"] for o in run([{"$sort": {"_id": -1}}], [{"_id": i} for i in range(5)])] == \
        [4, 3, 2, 1, 0]


ARTISTS = [
    {"_id": 1, "last_name": "Bernard", "first_name": "Emil", "year_born": 1868,
     "year_died": 1941, "nationality": "France"},
    {"_id": 2, "last_name": "Rippl-Ronai", "first_name": "Joszef", "year_born": 1861,
     "year_died": 1927, "nationality": "Hungary"},
    {"_id": 3, "last_name": "Ostroumova", "first_name": "Anna", "year_born": 1871,
     "year_died": 1955, "nationality": "Russia"},
    {"_id": 4, "last_name": "Van Gogh", "first_name": "Vincent", "year_born": 1853,
     "year_died": 1890, "nationality": "Holland"},
    {"_id": 5, "last_name": "Maurer", "first_name": "Alfred", "year_born": 1868,
     "year_died": 1932, "nationality": "USA"},
    {"_id": 6, "last_name": "Munch", "first_name": "Edvard", "year_born": 1863,
     "year_died": 1944, "nationality": "Norway"},
    {"_id": 7, "last_name": "Redon", "first_name": "Odilon", "year_born": 1840,
     "year_died": 1916, "nationality": "France"},
    {"_id": 8, "last_name": "Diriks", "first_name": "Edvard", "year_born": 1855,
     "year_died": 1930, "nationality": "Norway"},
]


def test_bucket() -> None:
    # bucket/: artists by birth year, default bucket "Other"
    out = run([{"$bucket": {"groupBy": "$year_born", "boundaries": [1840, 1850, 1860, 1870,
                                                                    1880],
                            "default": "Other",
                            "output": {"count": {"$sum": 1},
                                       "artists": {"$push": "$last_name"}}}}], ARTISTS)
    assert out == [{"_id": 1840, "count": 1, "artists": ["Redon"]},
                   {"_id": 1850, "count": 2, "artists": ["Van Gogh", "Diriks"]},
                   {"_id": 1860, "count": 4, "artists": ["Bernard", "Rippl-Ronai", "Maurer",
                                                         "Munch"]},
                   {"_id": 1870, "count": 1, "artists": ["Ostroumova"]}]
    out = run([{"$bucket": {"groupBy": "$x", "boundaries": [0, 10], "default": "Other"}}],
              [{"x": 1}, {"x": "a"}, {}, {"x": 10}])
    assert out == [{"_id": 0, "count": 1}, {"_id": "Other", "count": 3}]
    with pytest.raises(MongoError) as e:
        run([{"$bucket": {"groupBy": "$x", "boundaries": [0, 10]}}], [{"x": 11}])
    assert e.value.code == 40066


ARTWORK = [
    {"_id": 1, "price": Decimal128("199.99")}, {"_id": 2, "price": Decimal128("280.00")},
    {"_id": 3, "price": Decimal128("76.04")}, {"_id": 4, "price": Decimal128("167.30")},
    {"_id": 5, "price": Decimal128("483.00")}, {"_id": 6, "price": Decimal128("385.00")},
    {"_id": 7, "price": Decimal128("159.00")}, {"_id": 8, "price": Decimal128("118.42")},
]


def test_bucket_auto() -> None:
    # bucketAuto/: artwork prices in 4 buckets
    out = run([{"$bucketAuto": {"groupBy": "$price", "buckets": 4}}], ARTWORK)
    assert out == [
        {"_id": {"min": Decimal128("76.04"), "max": Decimal128("159.00")}, "count": 2},
        {"_id": {"min": Decimal128("159.00"), "max": Decimal128("199.99")}, "count": 2},
        {"_id": {"min": Decimal128("199.99"), "max": Decimal128("385.00")}, "count": 2},
        {"_id": {"min": Decimal128("385.00"), "max": Decimal128("483.00")}, "count": 2}]
    # documents/ example: $documents then $bucketAuto
    out = run([{"$documents": [{"x": 10}, {"x": 2}, {"x": 5}]},
               {"$bucketAuto": {"groupBy": "$x", "buckets": 4}}], [])
    assert out == [{"_id": {"min": 2, "max": 5}, "count": 1},
                   {"_id": {"min": 5, "max": 10}, "count": 1},
                   {"_id": {"min": 10, "max": 10}, "count": 1}]
    # equal values stay in one bucket; granularity rounds the boundaries (R5: 1.0 1.6 2.5 4 6.3)
    out = run([{"$bucketAuto": {"groupBy": "$x", "buckets": 2}}],
              [{"x": 1}, {"x": 1}, {"x": 1}, {"x": 2}])
    assert [o["count"] for o in out] == [3, 1]
    out = run([{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "R5",
                                "output": {"xs": {"$push": "$x"}}}}],
              [{"x": v} for v in (1.1, 2, 3, 7)])
    assert out == [{"_id": {"min": 1.0, "max": 2.5}, "xs": [1.1, 2]},
                   {"_id": {"min": 2.5, "max": 10.0}, "xs": [3, 7]}]


def test_facet() -> None:
    # facet/: two sub-pipelines over the same input
    out = run([{"$facet": {
        "byPrice": [{"$bucketAuto": {"groupBy": "$price", "buckets": 2}}],
        "count": [{"$count": "total"}],
        "cheap": [{"$match": {"price": {"$lt": Decimal128("150")}}}, {"$project": {"_id": 1}}]}}],
        ARTWORK)
    assert out[0]["count"] == [{"total": 8}]
    assert [b["count"] for b in out[0]["byPrice"]] == [4, 4]
    assert out[0]["cheap"] == [{"_id": 3}, {"_id": 8}]


def test_sample_and_documents() -> None:
    docs = [{"_id": i} for i in range(20)]
    out = run([{"$sample": {"size": 5}}], docs)
    assert len(out) == 5 and len({o["_id"] for o in out}) == 5
    assert len(run([{"$sample": {"size": 50}}], docs)) == 20
    assert run([{"$documents": [{"a": 1}]}], docs) == [{"a": 1}]


def test_densify() -> None:
    # densify/: hourly time series between bounds (upper bound exclusive)
    weather = [{"metadata": {"sensorId": 5578}, "timestamp": d("2021-05-18T00:00:00Z"), "t": 12},
               {"metadata": {"sensorId": 5578}, "timestamp": d("2021-05-18T04:00:00Z"), "t": 11},
               {"metadata": {"sensorId": 5578}, "timestamp": d("2021-05-18T08:00:00Z"), "t": 11},
               {"metadata": {"sensorId": 5578}, "timestamp": d("2021-05-18T12:00:00Z"), "t": 12}]
    out = run([{"$densify": {"field": "timestamp", "range": {
        "step": 1, "unit": "hour",
        "bounds": [d("2021-05-18T00:00:00Z"), d("2021-05-18T08:00:00Z")]}}}], weather)
    assert [o["timestamp"] for o in out] == \
        [d(f"2021-05-18T{h:02d}:00:00Z") for h in range(9)] + [d("2021-05-18T12:00:00Z")]
    assert out[1] == {"timestamp": d("2021-05-18T01:00:00Z")}
    # densify/: partitions with "full" and "partition" bounds (the coffee example)
    coffee = [{"altitude": 600, "variety": "Arabica Typica", "score": 68.3},
              {"altitude": 750, "variety": "Arabica Typica", "score": 69.5},
              {"altitude": 950, "variety": "Arabica Typica", "score": 70.5},
              {"altitude": 1250, "variety": "Gesha", "score": 88.15},
              {"altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029}]
    out = run([{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                             "range": {"bounds": "full", "step": 200}}}], coffee)
    assert [(o["variety"], o["altitude"]) for o in out] == \
        [("Arabica Typica", a) for a in (600, 750, 800, 950, 1000, 1200, 1400, 1600)] + \
        [("Gesha", a) for a in (600, 800, 1000, 1200, 1250, 1400, 1600, 1700)]
    out = run([{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                             "range": {"bounds": "partition", "step": 200}}}], coffee)
    assert [(o["variety"], o["altitude"]) for o in out] == \
        [("Arabica Typica", a) for a in (600, 750, 800, 950)] + \
        [("Gesha", a) for a in (1250, 1450, 1650, 1700)]
    assert out[2] == {"altitude": 800, "variety": "Arabica Typica"}


def test_fill() -> None:
    # fill/: constant values, last observation carried forward, linear interpolation
    sales = [{"date": d("2022-02-02T00:00:00Z"), "bootsSold": 10, "sandalsSold": 20},
             {"date": d("2022-02-03T00:00:00Z"), "bootsSold": 12},
             {"date": d("2022-02-04T00:00:00Z"), "sneakersSold": 5}]
    out = run([{"$fill": {"output": {"bootsSold": {"value": 0}, "sandalsSold": {"value": 0},
                                     "sneakersSold": {"value": 0}}}}], sales)
    assert [(o["bootsSold"], o["sandalsSold"], o["sneakersSold"]) for o in out] == \
        [(10, 20, 0), (12, 0, 0), (0, 0, 5)]
    stock = [{"time": d("2021-03-08T09:00:00Z"), "price": 500},
             {"time": d("2021-03-08T10:00:00Z")},
             {"time": d("2021-03-08T11:00:00Z"), "price": 515},
             {"time": d("2021-03-08T12:00:00Z")},
             {"time": d("2021-03-08T13:00:00Z")},
             {"time": d("2021-03-08T14:00:00Z"), "price": 485}]
    out = run([{"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "linear"}}}}],
              stock)
    assert [o["price"] for o in out] == [500, 507.5, 515, 505.0, 495.0, 485]
    out = run([{"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "locf"}}}}],
              stock)
    assert [o["price"] for o in out] == [500, 500, 515, 515, 515, 485]


ORDERS = [{"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
          {"_id": 2, "item": "pecans", "price": 20, "quantity": 1}, {"_id": 3}]
INVENTORY = [{"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
             {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
             {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
             {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
             {"_id": 5, "sku": None, "description": "Incomplete"}, {"_id": 6}]


def ctx_with(**colls: list[dict]) -> PipelineContext:
    return PipelineContext(db="test", resolve_collection=lambda db, c: colls.get(c, []))


def test_lookup_equality() -> None:
    # lookup/: orders ⋈ inventory on item = sku (missing item matches null and missing sku)
    out = run([{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku",
                            "as": "inventory_docs"}}], ORDERS, ctx_with(inventory=INVENTORY))
    assert [[i["_id"] for i in o["inventory_docs"]] for o in out] == [[1], [4], [5, 6]]
    # an array localField matches any element (classes ⋈ members)
    classes = [{"_id": 1, "enrollmentlist": ["giraffe2", "pandabear", "artie"]},
               {"_id": 2, "enrollmentlist": ["giraffe1", "artie"]}]
    members = [{"_id": 1, "name": "artie"}, {"_id": 2, "name": "giraffe"},
               {"_id": 3, "name": "giraffe1"}, {"_id": 4, "name": "panda"},
               {"_id": 5, "name": "pandabear"}, {"_id": 6, "name": "giraffe2"}]
    out = run([{"$lookup": {"from": "members", "localField": "enrollmentlist",
                            "foreignField": "name", "as": "enrollee_info"}}], classes,
              ctx_with(members=members))
    assert [[m["_id"] for m in o["enrollee_info"]] for o in out] == [[1, 5, 6], [1, 3]]
    # numbers match by value across types; the foreign side's arrays match element-wise
    out = run([{"$lookup": {"from": "f", "localField": "k", "foreignField": "k", "as": "m"}}],
              [{"k": 1}], ctx_with(f=[{"k": 1.0}, {"k": [2, 1]}, {"k": "1"}]))
    assert len(out[0]["m"]) == 2


def test_lookup_pipeline_with_let() -> None:
    # lookup/: orders ⋈ warehouses with let and a correlated $expr
    orders = [{"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
              {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
              {"_id": 3, "item": "cookies", "price": 10, "ordered": 60}]
    warehouses = [{"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
                  {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
                  {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
                  {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
                  {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80}]
    out = run([{"$lookup": {
        "from": "warehouses", "let": {"order_item": "$item", "order_qty": "$ordered"},
        "pipeline": [{"$match": {"$expr": {"$and": [{"$eq": ["$stock_item", "$$order_item"]},
                                                    {"$gte": ["$instock", "$$order_qty"]}]}}},
                     {"$project": {"stock_item": 0, "_id": 0}}],
        "as": "stockdata"}}], orders, ctx_with(warehouses=warehouses))
    assert [o["stockdata"] for o in out] == [
        [{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}],
        [{"warehouse": "A", "instock": 80}], [{"warehouse": "A", "instock": 80}]]
    # concise correlated form: equality join plus a pipeline
    out = run([{"$lookup": {"from": "warehouses", "localField": "item",
                            "foreignField": "stock_item", "let": {"q": "$ordered"},
                            "pipeline": [{"$match": {"$expr": {"$gte": ["$instock", "$$q"]}}},
                                         {"$count": "n"}], "as": "x"}}],
              orders, ctx_with(warehouses=warehouses))
    assert [o["x"] for o in out] == [[{"n": 2}], [{"n": 1}], [{"n": 1}]]
    # $expr clauses inside a top-level $and see the let variables too
    out = run([{"$lookup": {"from": "warehouses", "let": {"it": "$item"}, "pipeline": [
        {"$match": {"$and": [{"$expr": {"$eq": ["$stock_item", "$$it"]}},
                             {"instock": {"$gt": 70}}]}}], "as": "x"}}], orders,
        ctx_with(warehouses=warehouses))
    assert [[w["_id"] for w in o["x"]] for o in out] == [[1], [2], [5]]
    # uncorrelated sub-pipeline, and $documents instead of a collection
    out = run([{"$lookup": {"pipeline": [{"$documents": [{"z": 1}]}], "as": "docs"}}],
              orders[:1], ctx_with())
    assert out[0]["docs"] == [{"z": 1}]


def test_union_with() -> None:
    # unionWith/: sales of two years combined
    y2017 = [{"store": "A", "qty": 1}, {"store": "B", "qty": 2}]
    y2018 = [{"store": "A", "qty": 5}]
    out = run([{"$set": {"_id": "2017"}},
               {"$unionWith": {"coll": "sales_2018", "pipeline": [{"$set": {"_id": "2018"}}]}},
               {"$group": {"_id": "$store", "total": {"$sum": "$qty"}}},
               {"$sort": {"total": -1}}], y2017, ctx_with(sales_2018=y2018))
    assert out == [{"_id": "A", "total": 6}, {"_id": "B", "total": 2}]
    assert run([{"$unionWith": "other"}], [{"a": 1}], ctx_with(other=[{"b": 2}])) == \
        [{"a": 1}, {"b": 2}]


def test_out_and_merge_call_the_sinks() -> None:
    written: list[tuple] = []
    ctx = PipelineContext(db="db1", out=lambda db, c, docs: written.append(("out", db, c,
                                                                            list(docs))),
                          merge=lambda db, c, docs, **kw: written.append(("merge", db, c,
                                                                          list(docs), kw)))
    assert run([{"$match": {"a": 1}}, {"$out": "target"}], [{"a": 1}, {"a": 2}], ctx) == []
    assert written[0] == ("out", "db1", "target", [{"a": 1}])
    run([{"$merge": {"into": {"db": "db2", "coll": "t"}, "on": "k",
                     "whenMatched": "replace"}}], [{"k": 1}], ctx)
    assert written[1] == ("merge", "db2", "t", [{"k": 1}],
                          {"on": ["k"], "when_matched": "replace",
                           "when_not_matched": "insert", "let": None})


def test_project() -> None:
    # project/: include fields, suppress _id, exclude fields, embedded fields, computed fields
    books = [{"_id": 1, "title": "abc123", "isbn": "0001122223334",
              "author": {"last": "zzz", "first": "aaa"}, "copies": 5, "lastModified": "2016-07-28"}]
    assert run([{"$project": {"title": 1, "author": 1}}], books) == \
        [{"_id": 1, "title": "abc123", "author": {"last": "zzz", "first": "aaa"}}]
    assert run([{"$project": {"_id": 0, "title": 1, "author": 1}}], books) == \
        [{"title": "abc123", "author": {"last": "zzz", "first": "aaa"}}]
    assert run([{"$project": {"lastModified": 0}}], books)[0].keys() == \
        {"_id", "title", "isbn", "author", "copies"}
    assert run([{"$project": {"author.first": 0, "lastModified": 0}}], books)[0]["author"] == \
        {"last": "zzz"}
    assert run([{"$project": {"title": 1, "isbn": {
        "prefix": {"$substr": ["$isbn", 0, 3]}, "group": {"$substr": ["$isbn", 3, 2]},
        "publisher": {"$substr": ["$isbn", 5, 4]}, "title": {"$substr": ["$isbn", 9, 3]},
        "checkDigit": {"$substr": ["$isbn", 12, 1]}},
        "lastName": "$author.last", "copiesSold": "$copies"}}], books) == \
        [{"_id": 1, "title": "abc123", "isbn": {"prefix": "000", "group": "11",
                                                "publisher": "2222", "title": "333",
                                                "checkDigit": "4"},
          "lastName": "zzz", "copiesSold": 5}]
    # project/: "Project New Array Fields" and conditionally excluding with $$REMOVE
    assert run([{"$project": {"myArray": ["$x", "$y"]}}], [{"_id": 1, "x": 1}]) == \
        [{"_id": 1, "myArray": [1, None]}]
    assert run([{"$project": {"a": {"$cond": [False, 1, "$$REMOVE"]}, "b": 1}}],
               [{"_id": 1, "a": 5, "b": 2}]) == [{"_id": 1, "b": 2}]
    # aggregation, not find, semantics: $slice is the expression; nested arrays are projected
    assert run([{"$project": {"_id": 0, "s": {"$slice": ["$arr", 2]}}}], [{"arr": [1, 2, 3]}]) == \
        [{"s": [1, 2]}]
    assert run([{"$project": {"_id": 0, "a.c": 1}}],
               [{"a": [{"c": 1, "d": 2}, 5, [{"c": 3}]]}]) == [{"a": [{"c": 1}, [{"c": 3}]]}]
    # (the inclusion pass drops the scalar element before computed fields are added)
    assert run([{"$project": {"_id": 0, "a.e": "$x"}}], [{"a": [{"c": 1}, 5], "x": 9}]) == \
        [{"a": [{"e": 9}]}]
    assert run([{"$project": {"_id": 0, "t": "$$NOW"}}], [{}],
               PipelineContext(now=DatetimeMS(7))) == [{"t": DatetimeMS(7)}]


@pytest.mark.parametrize("spec,code", [
    ({"a": 1, "b": 0}, 31254), ({"a": 0, "b": 1}, 31253), ({"a": 0, "b": "$x"}, 31252),
    ({"a": {"$b": "$a"}}, 31325), ({"a": {"$elemMatch": {"x": 1}}}, 31325),
    ({"a": 1, "a.b": 1}, 31249), ({"a.b": 1, "a": 1}, 31250), ({"a": {}}, 51270),
    ({"$a": 1}, 16410), ({"a": {"$slice": 2}}, 28667),
])
def test_project_errors(spec: dict, code: int) -> None:
    with pytest.raises(MongoError) as e:
        run([{"$project": spec}], [{"a": 1}])
    assert e.value.code == code, e.value


def test_match_empty_and_expr_only() -> None:
    docs = [{"a": 1}, {"a": 2}]
    assert run([{"$match": {}}], docs) == docs
    assert run([{"$match": {"$expr": {"$gt": ["$a", 1]}}}], docs) == [{"a": 2}]
    assert run([{"$match": {"a": {"$gte": 1}, "$expr": {"$lt": ["$a", 2]}}}], docs) == [{"a": 1}]


def test_sort_array_with_pattern() -> None:
    # sortArray/: team members sorted by a field of the element documents
    team = [{"name": "pat", "age": 30}, {"name": "dallas", "age": 36},
            {"name": "charlie", "age": 42}, {"name": "quinn", "age": 22}]
    from query.expressions import compile_expression
    e = compile_expression({"$sortArray": {"input": "$team", "sortBy": {"age": -1}}})
    assert [m["name"] for m in e.evaluate({"team": team}, {})] == \
        ["charlie", "dallas", "pat", "quinn"]


def test_out_without_sink_is_refused() -> None:
    with pytest.raises(MongoError) as e:
        run([{"$out": "x"}], [{"a": 1}])
    assert e.value.code == 238


def test_stage_inputs_are_not_mutated() -> None:
    docs = [{"a": {"b": 1}, "arr": [1, 2]}]
    snapshot = repr(docs)
    run([{"$set": {"a.c": 2}}, {"$unset": "a.b"}, {"$unwind": "$arr"},
         {"$setWindowFields": {"output": {"n": {"$count": {}}}}}], docs)
    assert repr(docs) == snapshot


