-- Distribute bucketd's bucket tables with Citus, by their shard column.
--
--   psql "$COORDINATOR_URI" -v ON_ERROR_STOP=1 -v schema=bucketd -f tools/postgres/distribute.sql
--
-- NOT RUN HERE: this project's tests have no Citus cluster; the script uses Citus's
-- documented functions (create_distributed_table, citus_add_local_table_to_metadata) and
-- the same table discovery as partition.sql, which is tested on plain PostgreSQL. See
-- docs/postgresql.md for what bucketd asks of the tables and what to check first.
--
-- Every bucket table of schema :schema (default bucketd) not distributed yet (record
-- tables `r<n>` whose `shard` column, layout version 2: a hash of the bucket's meta value,
-- 0 in every other record table, is not 0 throughout) becomes a hash-distributed table on
-- `shard`, co-located with the others (same column type, citus.shard_count shards). Citus requires unique keys to
-- contain the distribution column: the primary key (id) becomes (id, shard) first (UNIQUE
-- (id, shard) if shard may be NULL); bucketd allocates record ids, so they stay unique.
-- Every other table of the schema (the catalog bucketd_*, ordinary collections' records,
-- index tables) stays on the coordinator, added to Citus's metadata so that it can be
-- joined with distributed tables. Run it again after creating time-series collections.
-- Stop bucketd while it runs.

\if :{?schema}
\else
  \set schema bucketd
\endif
SELECT set_config('bucketd.schema', :'schema', false) AS schema \gset bucketd_

CREATE EXTENSION IF NOT EXISTS citus;

DO $$
DECLARE
  sch  text := current_setting('bucketd.schema');
  t    record;
  key  text;
  done int := 0;
  skip boolean;
BEGIN
  FOR t IN
    SELECT c.oid::regclass AS tbl, c.relname AS name, NOT a.attnotnull AS nullable
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'shard' AND NOT a.attisdropped
     WHERE n.nspname = sch AND c.relname ~ '^r[0-9]+$' AND c.relkind = 'r'
       AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
     ORDER BY c.relname
  LOOP
    -- bucket tables only: every other record table has shard 0 throughout
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s WHERE shard <> 0)', t.tbl) INTO skip;
    CONTINUE WHEN skip;
    key := CASE WHEN t.nullable THEN 'UNIQUE (id, shard)' ELSE 'PRIMARY KEY (id, shard)' END;
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', t.tbl, t.name || '_pkey');
    EXECUTE format('ALTER TABLE %s ADD %s', t.tbl, key);
    PERFORM create_distributed_table(t.tbl::text, 'shard', colocate_with => 'default');
    done := done + 1;
  END LOOP;
  -- the rest stays on the coordinator, known to Citus (joins with distributed tables)
  FOR t IN
    SELECT c.oid::regclass AS tbl FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = sch AND c.relkind = 'r' AND NOT c.relispartition
       AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
  LOOP
    PERFORM citus_add_local_table_to_metadata(t.tbl);
  END LOOP;
  RAISE NOTICE 'bucketd: % table(s) of schema % distributed by shard', done, sch;
END $$;
