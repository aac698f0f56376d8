-- Hash-partition bucketd's bucket tables by their shard column, on plain PostgreSQL.
--
--   psql "$URI" -v ON_ERROR_STOP=1 -v schema=bucketd -v partitions=8 -f tools/postgres/partition.sql
--
-- Every bucket table of schema :schema (default bucketd) not partitioned yet becomes a
-- table PARTITION BY HASH (shard) with :partitions partitions (default 8), named
-- <table>_p<n>, holding the same rows. Bucket tables are the record tables `r<n>` whose
-- `shard` column (layout version 2: a hash of the bucket's meta value; 0 in every other
-- record table) is not 0 throughout: time-series collections without data yet are left
-- for a later run. Run it again after creating new time-series collections: tables done
-- before are left alone. The record-id sequence a table owns moves to the new table. Each table is
-- converted in a transaction of its own under an ACCESS EXCLUSIVE lock: bucketd processes
-- running meanwhile wait for it, and go on with the partitioned table afterwards (tested);
-- a large table is copied once, so prefer a quiet moment.
--
-- PostgreSQL requires a partitioned table's unique keys to contain the partition column:
-- the primary key (id) becomes (id, shard) (UNIQUE (id, shard) if shard may be NULL). The
-- record ids stay unique because bucketd allocates them. See docs/postgresql.md.

\if :{?schema}
\else
  \set schema bucketd
\endif
\if :{?partitions}
\else
  \set partitions 8
\endif
SELECT set_config('bucketd.schema', :'schema', false) AS schema,
       set_config('bucketd.partitions', :'partitions', false) AS partitions \gset bucketd_

CREATE OR REPLACE PROCEDURE pg_temp.bucketd_partition_table(tbl regclass, parts int)
LANGUAGE plpgsql AS $$
DECLARE
  sch  text;
  name text;
  old  text;
  nullable boolean;
  key  text;
  i int;
  seq record;
BEGIN
  SELECT n.nspname, c.relname INTO sch, name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
  old := name || '_unpartitioned';
  EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE', sch, name);
  SELECT NOT a.attnotnull INTO nullable FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = 'shard';
  key := CASE WHEN nullable THEN 'UNIQUE (id, shard)' ELSE 'PRIMARY KEY (id, shard)' END;
  EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', sch, name, old);
  -- the old primary key's index keeps its name (<table>_pkey): free it for the new one
  EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT IF EXISTS %I', sch, old, name || '_pkey');
  EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING IDENTITY '
                 'INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION, %s) '
                 'PARTITION BY HASH (shard)', sch, name, sch, old, key);
  FOR i IN 0 .. parts - 1 LOOP
    EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES WITH (MODULUS %s, '
                   'REMAINDER %s)', sch, name || '_p' || i, sch, name, parts, i);
  END LOOP;
  EXECUTE format('INSERT INTO %I.%I OVERRIDING SYSTEM VALUE SELECT * FROM %I.%I',
                 sch, name, sch, old);
  -- sequences owned by the old table's columns (bucketd's record-id sequence) move to the
  -- new one, or they would go with the old table
  FOR seq IN
    SELECT d.objid::regclass AS s, a.attname AS col FROM pg_depend d
      JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'S'
      JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
     WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
       AND d.refobjid = tbl AND d.deptype = 'a'
  LOOP
    EXECUTE format('ALTER SEQUENCE %s OWNED BY %I.%I.%I', seq.s, sch, name, seq.col);
  END LOOP;
  EXECUTE format('DROP TABLE %I.%I', sch, old);
  RAISE NOTICE 'bucketd: %.% is partitioned by hash (shard) into % partitions', sch, name, parts;
END $$;

DO $$
DECLARE
  sch   text := current_setting('bucketd.schema');
  parts int  := current_setting('bucketd.partitions')::int;
  t     regclass;
  done  int := 0;
  skip  boolean;
BEGIN
  IF parts < 1 THEN
    RAISE EXCEPTION 'partitions must be at least 1, not %', parts;
  END IF;
  FOR t IN
    SELECT c.oid::regclass FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'shard' AND NOT a.attisdropped
     WHERE n.nspname = sch AND c.relname ~ '^r[0-9]+$' AND c.relkind = 'r'
       AND NOT c.relispartition
     ORDER BY c.relname
  LOOP
    -- bucket tables only: every other record table has shard 0 throughout
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s WHERE shard <> 0)', t) INTO skip;
    CONTINUE WHEN skip;
    CALL pg_temp.bucketd_partition_table(t, parts);
    COMMIT;  -- one table at a time: its lock is held for its copy only
    done := done + 1;
  END LOOP;
  RAISE NOTICE 'bucketd: % table(s) of schema % partitioned', done, sch;
END $$;
