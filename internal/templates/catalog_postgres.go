package templates

import (
	"fmt"
	"strings"
)

// postgresExtensionPackages are the Debian trixie packages of the
// extensions the postgres template adds to PostgreSQL 17's own contrib
// (which the server package already holds). postgis and timescaledb are
// left out: each pulls in hundreds of MiB the bake would have to carry.
var postgresExtensionPackages = []string{
	"postgresql-17-pgvector", "postgresql-17-cron", "postgresql-17-hypopg", "postgresql-17-repack",
	"postgresql-17-partman", "postgresql-17-similarity", "postgresql-17-pgaudit", "postgresql-17-pgextwlist",
	"pgbouncer",
}

// PostgresExtensions are the extensions a role that is not a superuser may
// CREATE EXTENSION in a database it owns on the postgres template: PG 17's
// own trusted ones need nothing, the rest go through pgextwlist, an
// allow-list that runs the extension's script as the bootstrap superuser
// and makes the caller its owner. pg_cron is installed but not listed: it
// needs shared_preload_libraries and one fixed database.
var PostgresExtensions = []string{
	"vector", "pg_stat_statements", "pgcrypto", "uuid-ossp", "hstore", "citext", "pg_trgm",
	"hypopg", "pg_repack", "pg_partman", "pg_similarity", "pgaudit", "btree_gin", "btree_gist",
	"fuzzystrmatch", "unaccent", "ltree", "tablefunc",
}

// postgresExtensionConf writes conf.d/pandastack.conf: pg_stat_statements and
// pgaudit preloaded (counting and auditing need their hooks from the start;
// pgaudit logs nothing until pgaudit.log is set),
// pgextwlist loaded in every session
// with the allow-list (from $libdir/plugins by local_preload_libraries when
// Debian puts it there, else by session_preload_libraries).
var postgresExtensionConf = fmt.Sprintf(`d=/etc/postgresql/17/main/conf.d; l=/usr/lib/postgresql/17/lib; mkdir -p $d && `+
	`if test -f $l/plugins/pgextwlist.so; then p=local_preload_libraries; elif test -f $l/pgextwlist.so; then p=session_preload_libraries; else echo pgextwlist.so not found >&2; exit 1; fi && `+
	`printf "shared_preload_libraries = 'pg_stat_statements,pgaudit'\n$p = 'pgextwlist'\nextwlist.extensions = '%s'\n" > $d/pandastack.conf`,
	strings.Join(PostgresExtensions, ","))
