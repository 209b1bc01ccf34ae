// Package postgres is the kv engine for more than one berth node: a
// kv.Store over a PostgreSQL database (github.com/jackc/pgx/v5), which
// every node opens. It keeps to SQL that CockroachDB and YugabyteDB
// document as theirs too (plain tables and indexes, INSERT ... ON
// CONFLICT, SELECT ... FOR SHARE, savepoints, cursors), so the metadata
// can live on a database that itself scales out; its tests run on
// PostgreSQL. docs/operations.md, "Metadata on
// PostgreSQL", says what it needs of the database and why.
//
// # Schema
//
// Open creates three tables if they are missing:
//
//	berth_kv      (k BYTEA PRIMARY KEY, v BYTEA NOT NULL, expires_at TIMESTAMPTZ)
//	berth_kv_gen  (shard INT4 PRIMARY KEY, n INT8 NOT NULL)   -- Generation
//	berth_kv_seq  (kind TEXT PRIMARY KEY, hi INT8 NOT NULL)   -- NextID
//
// and a partial index on berth_kv (expires_at) for the rows that expire.
// bytea compares bytewise, which is kv's key order, so scans are range
// reads of the primary key.
//
// # Transactions
//
// Update runs at SERIALIZABLE; a serialization failure (40001) or
// deadlock (40P01) runs fn again in a new transaction after a short
// random pause, up to Options.ConflictRetries times, then gives
// kv.ErrConflict. Before it commits, a write transaction checks its point
// reads (Get) the way kv/badger does, first committer wins: a key it read
// that another transaction changed and committed since it began makes it
// fail and run again, rather than be ordered before that commit (see
// txn.finish). View runs at REPEATABLE READ, READ ONLY: a snapshot that
// never fails for serialization.
//
// # Generation
//
// Every write transaction adds one to a row of berth_kv_gen (one of
// genShards, chosen at random so that concurrent writers rarely touch the
// same one) in the same transaction, and Generation reads the sum of the
// rows: the count of write transactions committed by every node, which
// becomes visible atomically with each commit's data. So a Generation
// call made after any node's commit is visible sees it move, and no
// window exists in which a commit is visible but not counted. The price
// is one round trip to the database per Generation call, and one more
// statement per write transaction.
package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"berth/kv"
)

// Defaults for Options fields left at zero.
const (
	// DefaultConflictRetries bounds how often Update re-runs a
	// transaction that failed to serialize. Conflicts are between
	// requests touching the same folder or counter and clear within a
	// few tries; the bound fails fast on a bug that conflicts forever.
	DefaultConflictRetries = 16
	// DefaultIDLease is how many ids one reservation of a sequence takes
	// (NextID): one write per lease, and a restart or crash skips at most
	// this many ids per kind and node.
	DefaultIDLease = 100
	// DefaultExpireEvery is how often expired rows are deleted. Reads
	// already skip them; the delete only gives back their space.
	DefaultExpireEvery = time.Minute
	// DefaultMaxTxnBytes bounds the keys and values one transaction
	// writes: CockroachDB refuses a transaction much larger than this
	// (its raft command limit is 64 MiB), and a bound that holds on
	// every database keeps berth's behaviour the same on each.
	DefaultMaxTxnBytes = 32 << 20
)

// genShards is the number of rows of berth_kv_gen. Two write transactions
// that pick the same row conflict and one runs again, so more rows mean
// fewer such conflicts and a slightly larger sum for Generation to read.
const genShards = 64

// priorityAfter is the number of conflicts after which an Update makes
// new tries of this process's other Updates wait for it (see DB.prio).
const priorityAfter = 4

// expireBatch is how many expired rows one delete removes: small enough
// that it holds its locks briefly and never grows into a transaction
// too big.
const expireBatch = 500

// Scan reads batches of keys, starting small because many scans stop
// after a few keys, and growing to scanBatchMax; one batch at a time is
// in memory, whatever the prefix holds.
const (
	scanBatchMin = 32
	scanBatchMax = 1024
)

// Options configures Open.
type Options struct {
	// DSN is the database's connection string (a postgres:// URL or
	// key=value pairs, as libpq takes).
	DSN string
	// Logger receives the background expiry's errors. Nil means
	// slog.Default().
	Logger *slog.Logger
	// ConflictRetries is how many times Update re-runs fn after a
	// serialization failure before it returns kv.ErrConflict. Zero means
	// DefaultConflictRetries; negative means never retry.
	ConflictRetries int
	// IDLease is how many ids NextID reserves at a time. Zero means
	// DefaultIDLease.
	IDLease int
	// ExpireEvery is the pause between deletes of expired rows. Zero
	// means DefaultExpireEvery; negative turns the delete off (reads
	// still hide expired rows).
	ExpireEvery time.Duration
	// MaxTxnBytes bounds the bytes of keys and values one transaction
	// writes; beyond it Set returns kv.ErrTxnTooBig. Zero means
	// DefaultMaxTxnBytes.
	MaxTxnBytes int64
	// MaxConns bounds the connections transactions use; zero means
	// DefaultMaxConns. Sequences and Generation have a few more of their
	// own (auxConns).
	MaxConns int32
}

// DefaultMaxConns is the default of Options.MaxConns: a request holds a
// connection for one transaction at a time, and 32 serve far more
// concurrent requests than a node's cores, while several nodes stay well
// under PostgreSQL's default max_connections of 100.
const DefaultMaxConns = 32

// auxConns is the size of the second pool, for the calls that may come
// from inside a transaction's fn (NextID, Generation) and the expiry.
// Were they to take their connection from the transactions' pool, as many
// Updates as it has connections, each calling NextID, would wait for
// each other for ever.
const auxConns = 8

// seqConns is the size of the pool of the sequences' statements (NextID,
// NextOrderedID), whose commits do not wait for the WAL to reach the disk
// (synchronous_commit off, for that pool's connections alone): an id
// only matters once a write that uses it commits, and that commit, which
// waits, flushes the WAL up to itself, the id's taking with it; a crash
// before loses an id nobody used. Waiting would hold the sequence's row
// through a disk flush per id, and the activity log takes one id a write
// (NextOrderedID), which would queue every node's writes on one row.
const seqConns = 4

// DB is a kv.Store on a PostgreSQL database. Create it with Open; it is
// safe for concurrent use, and any number of DBs, in any number of
// processes, may use one database at once.
type DB struct {
	pool *pgxpool.Pool // transactions
	aux  *pgxpool.Pool // Generation, Expire, RaiseSequence: never held across a call
	seq  *pgxpool.Pool // NextID, NextOrderedID: commits without a flush (seqConns)
	// writers bounds the Updates in flight to three quarters of pool, so
	// that a View called inside an Update's fn (which kv allows) always
	// finds a connection.
	writers  chan struct{}
	log      *slog.Logger
	retries  int
	lease    uint64
	maxBytes int64

	// mu guards closed, active and seqs; Close waits on idle until no
	// call is in flight.
	mu     sync.Mutex
	idle   sync.Cond
	closed bool
	active int
	seqs   map[string]*sequence

	// prio keeps a transaction that lost several times from losing
	// forever to this process's other writers (as in kv/badger): it
	// takes prio, and new tries of other Updates wait until it is done.
	prio        sync.Mutex
	prioWaiting atomic.Int32

	// retries counts the tries Update ran again (Retries).
	conflicts atomic.Uint64

	// gen maps the sum of berth_kv_gen onto what Generation returns
	// (see there).
	gen genState

	// genShard picks the row of berth_kv_gen a commit adds to (at
	// random; tests fix it).
	genShard func() int

	// ends counts the transactions being ended after their callers
	// moved on (txn.release); Close waits for them.
	ends sync.WaitGroup
	// trace counts round trips (RoundTrips).
	trace *tracer

	stopExpire context.CancelFunc
	expireDone chan struct{}
}

var _ kv.Store = (*DB)(nil)

// schema creates what the engine needs, if it is missing. Every statement
// is one CockroachDB and YugabyteDB take as well (see the package
// documentation); on YugabyteDB, create berth_kv beforehand with
// PRIMARY KEY (k ASC), since its default is hash sharding, under which a
// range scan reads every tablet.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS berth_kv (
		k BYTEA PRIMARY KEY,
		v BYTEA NOT NULL,
		expires_at TIMESTAMPTZ
	)`,
	`CREATE INDEX IF NOT EXISTS berth_kv_expires ON berth_kv (expires_at) WHERE expires_at IS NOT NULL`,
	`CREATE TABLE IF NOT EXISTS berth_kv_gen (
		shard INT4 PRIMARY KEY,
		n INT8 NOT NULL
	)`,
	fmt.Sprintf(`INSERT INTO berth_kv_gen (shard, n)
		SELECT g, 0 FROM generate_series(0, %d) AS g
		ON CONFLICT (shard) DO NOTHING`, genShards-1),
	`CREATE TABLE IF NOT EXISTS berth_kv_seq (
		kind TEXT PRIMARY KEY,
		hi INT8 NOT NULL
	)`,
}

// Open connects to the database of opts.DSN, creates the schema if it is
// missing, and starts the background delete of expired rows. It fails
// when the database cannot be reached or refuses the schema, with the
// reason in the error.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if opts.DSN == "" {
		return nil, errors.New("kv/postgres: Options.DSN is empty")
	}
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("kv/postgres: parsing the DSN: %w", err)
	}
	cfg.MaxConns = DefaultMaxConns
	trace := &tracer{}
	cfg.ConnConfig.Tracer = trace
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("kv/postgres: %w", err)
	}
	auxCfg := cfg.Copy()
	auxCfg.MaxConns = auxConns
	aux, err := pgxpool.NewWithConfig(ctx, auxCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("kv/postgres: %w", err)
	}
	seqCfg := cfg.Copy()
	seqCfg.MaxConns = seqConns
	seqCfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	seq, err := pgxpool.NewWithConfig(ctx, seqCfg)
	if err != nil {
		pool.Close()
		aux.Close()
		return nil, fmt.Errorf("kv/postgres: %w", err)
	}
	if err := createSchema(ctx, pool); err != nil {
		pool.Close()
		aux.Close()
		seq.Close()
		return nil, err
	}
	d := &DB{
		pool:     pool,
		aux:      aux,
		seq:      seq,
		writers:  make(chan struct{}, max(1, cfg.MaxConns*3/4)),
		log:      opts.Logger,
		retries:  opts.ConflictRetries,
		lease:    uint64(opts.IDLease),
		maxBytes: opts.MaxTxnBytes,
		seqs:     make(map[string]*sequence),
		trace:    trace,
		genShard: func() int { return rand.IntN(genShards) },
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	switch {
	case d.retries == 0:
		d.retries = DefaultConflictRetries
	case d.retries < 0:
		d.retries = 0
	}
	if d.lease == 0 {
		d.lease = DefaultIDLease
	}
	if d.maxBytes <= 0 {
		d.maxBytes = DefaultMaxTxnBytes
	}
	d.idle.L = &d.mu
	every := opts.ExpireEvery
	if every == 0 {
		every = DefaultExpireEvery
	}
	ectx, cancel := context.WithCancel(context.Background())
	d.stopExpire = cancel
	d.expireDone = make(chan struct{})
	if every > 0 {
		go d.expireLoop(ectx, every)
	} else {
		close(d.expireDone)
	}
	return d, nil
}

// createSchema runs schema. Two nodes starting at once may both create a
// table; PostgreSQL's IF NOT EXISTS is not safe against that race and
// one fails with a unique violation, so the loser tries again, and then
// finds the table.
func createSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var err error
	for range 3 {
		err = nil
		for _, stmt := range schema {
			if _, err = pool.Exec(ctx, stmt); err != nil {
				break
			}
		}
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || (pe.Code != "23505" && pe.Code != "42P07" && !retryable(err)) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("kv/postgres: creating the schema: %w", err)
	}
	return nil
}

// enter registers a call in flight, or returns kv.ErrClosed. Every
// successful enter is paired with leave.
func (d *DB) enter() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return kv.ErrClosed
	}
	d.active++
	return nil
}

func (d *DB) leave() {
	d.mu.Lock()
	d.active--
	if d.active == 0 {
		d.idle.Broadcast()
	}
	d.mu.Unlock()
}

// View runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot
// for all of fn's reads. Writes inside fn fail with kv.ErrReadOnly.
//
// The transaction begins with fn's first read, in the same round trip
// (txn.query), and a View that reads nothing costs none. Its end goes
// out after View has returned (txn.release): a read-only snapshot has
// nothing to make durable and nothing to fail at its end, so its caller
// need not wait for the answer. A View of one Get so costs its caller
// one round trip.
func (d *DB) View(ctx context.Context, fn func(kv.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return mapErr(err)
	}
	t := &txn{ctx: ctx, conn: conn, begin: beginView, db: d}
	defer t.release()
	return fn(t)
}

// The statements that begin a View's and an Update's transaction, sent
// together with its first statement.
const (
	beginView   = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	beginUpdate = "BEGIN ISOLATION LEVEL SERIALIZABLE"
)

// endTimeout bounds the end of a transaction sent after its caller has
// moved on (txn.release).
const endTimeout = 5 * time.Second

// batchRows are the rows of a batch's last statement; closing them ends
// the batch, after which the connection takes the next statement.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// Update runs fn in a SERIALIZABLE transaction and commits it; the
// database makes the commit durable before it answers. A try that fails
// to serialize is run again after a short random pause, up to the
// retries of Options, then Update returns kv.ErrConflict; ctx is checked
// before every try. Errors returned by fn are returned unchanged and
// nothing is written.
//
// fn must not call Update itself (NextID and View are fine): besides
// being a side effect outside the transaction, it could wait on its own
// caller when that caller holds priority.
func (d *DB) Update(ctx context.Context, fn func(kv.Txn) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	prioritized := false
	defer func() {
		if prioritized {
			d.prio.Unlock()
			d.prioWaiting.Add(-1)
		}
	}()
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case try == priorityAfter:
			d.prioWaiting.Add(1)
			d.prio.Lock()
			prioritized = true
		case !prioritized && d.prioWaiting.Load() > 0:
			d.prio.Lock()
			d.prio.Unlock()
		}
		var err error
		select {
		case d.writers <- struct{}{}:
			err = d.updateOnce(ctx, fn)
			<-d.writers
		case <-ctx.Done():
			return ctx.Err()
		}
		if !retryable(err) {
			return err
		}
		d.conflicts.Add(1)
		if try >= d.retries {
			return fmt.Errorf("%w (after %d tries: %v)", kv.ErrConflict, try+1, err)
		}
		if err := backoff(ctx, try); err != nil {
			return err
		}
	}
}

// updateOnce runs one try of Update. A serialization failure comes back
// as the database's error, for Update to recognize (retryable); other
// database errors are mapped.
//
// Its round trips: BEGIN goes with the first statement, and the writes
// still queued, the checks of finish and COMMIT go in one batch; a
// transaction of reads then writes costs its reads and one more.
func (d *DB) updateOnce(ctx context.Context, fn func(kv.Txn) error) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return mapErr(err)
	}
	t := &txn{ctx: ctx, conn: conn, begin: beginUpdate, db: d, write: true}
	defer t.release()
	if err := fn(t); err != nil {
		// fn may have wrapped or swallowed a statement's failure; a try
		// that failed to serialize is run again whatever fn made of it.
		if retryable(t.failed) {
			return t.failed
		}
		return err
	}
	if t.failed != nil {
		// fn went on past a failed statement, after which the database
		// refuses the rest of the transaction.
		return t.failed
	}
	if err := t.commit(); err != nil {
		if retryable(err) {
			return err
		}
		return mapErr(err)
	}
	return nil
}

// Retries returns how many tries of Update failed to serialize and were
// run again (or given up) since Open: a figure to watch, since each costs
// a round of the transaction.
func (d *DB) Retries() uint64 { return d.conflicts.Load() }

// retryable reports whether err is a failure to serialize that a new try
// may not meet: a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// backoff sleeps a random time that grows with try, from at most 1ms up
// to at most about 64ms: a round trip to a database is slower than
// Badger's memtable, so the pauses are longer than kv/badger's.
func backoff(ctx context.Context, try int) error {
	limit := int64(time.Millisecond) << min(try, 6)
	t := time.NewTimer(time.Duration(rand.Int64N(limit) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// mapErr translates the driver's errors to kv's. Unknown errors are
// wrapped, keeping their text for the log.
func mapErr(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return kv.ErrNotFound
	case retryable(err):
		return fmt.Errorf("%w: %w", kv.ErrConflict, err)
	case errors.As(err, &pe) && pe.Code == "25006": // read_only_sql_transaction
		return fmt.Errorf("%w: %w", kv.ErrReadOnly, err)
	case errors.As(err, &pe) && pe.Code == "54000": // program_limit_exceeded
		return fmt.Errorf("%w: %w", kv.ErrTxnTooBig, err)
	default:
		return fmt.Errorf("kv: postgres: %w", err)
	}
}

// genState turns the sums that Generation reads into the numbers it
// returns, under mu. Sums only grow, but concurrent calls may finish out
// of order, and a call that cannot read the sum still needs a number.
type genState struct {
	mu      sync.Mutex
	sum     uint64 // the largest sum read
	out     uint64 // the number that goes with it, the largest handed out
	unknown bool   // a call failed since: the next read moves out
}

// Generation returns a number that moves with every write transaction
// committed on the database, by any node: it reads the sum of
// berth_kv_gen, which each commit moves atomically with its data, so a
// commit visible to a later read is always counted (see the package
// documentation). A read that finishes after a later one returns the
// later one's number: the caller reads after both, so it sees what the
// larger sum counts.
//
// When the sum cannot be read (the database is down, or the store is
// closed), the call returns a number no caller had, and the next read
// moves past it again: a cache then misses rather than trusting a number
// that may be stale.
func (d *DB) Generation() uint64 {
	sum, err := d.readGeneration()
	g := &d.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.out++
		g.unknown = true
		return g.out
	}
	if sum > g.sum || g.unknown {
		g.out++
		g.sum = max(g.sum, sum)
		g.unknown = false
	}
	return g.out
}

// Now returns the database's clock (now()), the one that keys' lifetimes
// are computed and compared by: a node compares its own with it, where
// records it stamps by its own clock are read by other nodes (the
// daemon's clock check).
func (d *DB) Now(ctx context.Context) (time.Time, error) {
	if err := d.enter(); err != nil {
		return time.Time{}, err
	}
	defer d.leave()
	var now time.Time
	err := d.aux.QueryRow(ctx, `SELECT now()`).Scan(&now)
	return now, err
}

// generationTimeout bounds a Generation call, which has no context.
const generationTimeout = 5 * time.Second

func (d *DB) readGeneration() (uint64, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.leave()
	ctx, cancel := context.WithTimeout(context.Background(), generationTimeout)
	defer cancel()
	var sum int64
	err := d.aux.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::INT8 FROM berth_kv_gen`).Scan(&sum)
	return uint64(sum), err
}

// sequence is one kind's lease of ids: next up to hi are this store's to
// hand out.
type sequence struct {
	mu       sync.Mutex
	next, hi uint64
}

// NextID returns the next id of the sequence named kind, starting at 1.
// Ids come in leases of Options.IDLease: one statement of its own adds
// the lease to the kind's row of berth_kv_seq and returns the new end,
// and the database commits that durably before any id of it is handed
// out. Every node's leases come from that row, so no id is handed out
// twice, across nodes and restarts; ids a store did not use before it
// closed or crashed are skipped. Within one store ids ascend; across
// nodes they interleave by lease.
func (d *DB) NextID(ctx context.Context, kind string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.leave()
	d.mu.Lock()
	s, ok := d.seqs[kind]
	if !ok {
		s = &sequence{}
		d.seqs[kind] = s
	}
	d.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == 0 || s.next > s.hi {
		var hi int64
		err := d.seq.QueryRow(ctx, `INSERT INTO berth_kv_seq (kind, hi) VALUES ($1, $2)
			ON CONFLICT (kind) DO UPDATE SET hi = berth_kv_seq.hi + excluded.hi
			RETURNING hi`, kind, int64(d.lease)).Scan(&hi)
		if err != nil {
			return 0, fmt.Errorf("kv: next id of %q: %w", kind, mapErr(err))
		}
		s.hi = uint64(hi)
		s.next = s.hi - d.lease + 1
	}
	id := s.next
	s.next++
	return id, nil
}

// NextOrderedID returns the next id of the sequence named kind, greater
// than every id of it any node reserved before (kv.OrderedIDs): one
// statement of its own adds one to the kind's row of berth_kv_seq, a
// lease of one id. It costs a round trip per id, where NextID costs one
// per Options.IDLease ids, and is for sequences whose order is read as
// time order across nodes (the activity log's).
func (d *DB) NextOrderedID(ctx context.Context, kind string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.leave()
	var hi int64
	err := d.seq.QueryRow(ctx, `INSERT INTO berth_kv_seq (kind, hi) VALUES ($1, 1)
		ON CONFLICT (kind) DO UPDATE SET hi = berth_kv_seq.hi + 1
		RETURNING hi`, kind).Scan(&hi)
	if err != nil {
		return 0, fmt.Errorf("kv: next ordered id of %q: %w", kind, mapErr(err))
	}
	return uint64(hi), nil
}

// Close waits for calls in flight, stops the background expiry and
// closes the connections. Calls made after Close return kv.ErrClosed;
// closing twice is not an error. The unused ids of the sequence leases
// are skipped for good.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	for d.active > 0 {
		d.idle.Wait()
	}
	d.mu.Unlock()
	d.stopExpire()
	<-d.expireDone
	d.ends.Wait()
	d.pool.Close()
	d.aux.Close()
	d.seq.Close()
	return nil
}

// expireLoop deletes expired rows every pause until ctx ends. Reads
// already hide them (see txn.Get), so this only gives their space back,
// and a node that is down delays nothing but that. Every node runs it;
// the deletes are idempotent, and each is a short statement of its own.
func (d *DB) expireLoop(ctx context.Context, every time.Duration) {
	defer close(d.expireDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := d.Expire(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, kv.ErrClosed) {
			d.log.Warn("kv: deleting expired keys", "error", err)
		}
	}
}

// Expire deletes the rows that have expired, in batches of expireBatch,
// and returns how many it deleted. The background expiry calls it; it is
// exported for tests and for an operator who wants the space back now.
//
// The expiry is checked again on the row the delete locks (the outer
// condition): a row renewed by a concurrent SetTTL or Set is kept.
func (d *DB) Expire(ctx context.Context) (int64, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.leave()
	var total int64
	for {
		tag, err := d.aux.Exec(ctx, `DELETE FROM berth_kv
			WHERE expires_at <= now() AND k IN (
				SELECT k FROM berth_kv WHERE expires_at <= now() ORDER BY expires_at LIMIT $1)`,
			expireBatch)
		if err != nil {
			return total, mapErr(err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < expireBatch {
			return total, nil
		}
	}
}

// live is the condition of a row that has not expired. now() is the
// transaction's start on every node (the database's clock, not the
// nodes'), so one transaction sees one set of live keys.
const live = `(expires_at IS NULL OR expires_at > now())`

// txn is one transaction on one connection.
type txn struct {
	ctx   context.Context
	conn  *pgxpool.Conn
	begin string // the statement that begins it (beginView, beginUpdate)
	begun bool   // begin has been sent
	db    *DB
	write bool // Update's: it may write
	wrote bool // a write was made: the commit moves Generation

	// failed is the first statement's error: the database refuses the
	// rest of the transaction after it.
	failed error
	// pending are the writes not yet sent (queue), and pendingBytes
	// their keys' and values' size.
	pending      []pendingWrite
	pendingBytes int
	// control are the declares and closes of scans' cursors, sent with
	// the next statement.
	control []pendingWrite
	// cursors counts the scans' cursors open, to name the next one.
	cursors int
	// bytes counts the keys and values written (Options.MaxTxnBytes).
	bytes int64
	// found and missing are the keys Get read with and without a value,
	// for finish.
	found, missing map[string]struct{}
	// known are the values of keys read by Get or written, so a second
	// Get of a key costs no round trip (see Get).
	known map[string]knownValue
}

// knownValue is what a transaction knows a key holds: v, or nothing when
// !ok; big is a key written with a value too large to keep, which Get
// reads back from the database.
type knownValue struct {
	v   []byte
	ok  bool
	big bool
}

// knownMax is the largest value a transaction keeps in txn.known: a
// second read of a larger one goes to the database, rather than a
// transaction that writes much holding all of it twice.
const knownMax = 64 << 10

// know notes what key holds now.
func (t *txn) know(key, v []byte, ok bool) {
	if t.known == nil {
		t.known = make(map[string]knownValue)
	}
	if ok && len(v) > knownMax {
		t.known[string(key)] = knownValue{big: true}
		return
	}
	t.known[string(key)] = knownValue{v: v, ok: ok}
}

// fail notes a statement's error and returns it mapped.
func (t *txn) fail(err error) error {
	if t.failed == nil && !errors.Is(err, pgx.ErrNoRows) {
		t.failed = err
	}
	if retryable(err) {
		// Keep the database's error: Update looks for it to run fn again.
		return fmt.Errorf("kv: %w", err)
	}
	return mapErr(err)
}

// Queued writes are sent before the commit when they reach either bound,
// with the next statement: what a transaction holds unsent stays small
// whatever it writes.
const (
	flushBytes = 1 << 20
	flushCount = 1000
)

// batch starts the batch of the next round trip: the BEGIN if the
// transaction has not begun, the queued writes when flush says so or
// they are many, then the cursors' statements.
func (t *txn) batch(flush bool) *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
		t.begun = true
	}
	if flush || t.pendingBytes > flushBytes || len(t.pending) > flushCount {
		for _, w := range t.pending {
			b.Queue(w.sql, w.args...)
		}
		t.pending, t.pendingBytes = nil, 0
	}
	for _, w := range t.control {
		b.Queue(w.sql, w.args...)
	}
	t.control = nil
	return b
}

// pendingIn reports whether a queued write is to a key from lo to hi
// (lo included; hi included when hiIncl, and a nil hi is open): a read
// of that range must see it.
func (t *txn) pendingIn(lo, hi []byte, hiIncl bool) bool {
	for _, w := range t.pending {
		k := w.args[0].([]byte)
		if bytes.Compare(k, lo) < 0 {
			continue
		}
		if c := bytes.Compare(k, hi); hi == nil || c < 0 || (hiIncl && c == 0) {
			return true
		}
	}
	return false
}

// query runs sql after what batch(flush) holds, in one round trip.
func (t *txn) query(flush bool, sql string, args ...any) (pgx.Rows, error) {
	b := t.batch(flush)
	if b.Len() == 0 {
		return t.conn.Query(t.ctx, sql, args...)
	}
	b.Queue(sql, args...)
	br := t.conn.SendBatch(t.ctx, b)
	for range b.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// release hands the connection back. A transaction still open (a View
// that read, an Update that failed) is ended first, after the caller has
// moved on: ending a read-only snapshot or a transaction that will not
// commit changes nothing the caller could wait for, and the connection
// is back in the pool once the end is answered. Close waits for it.
func (t *txn) release() {
	pc := t.conn.Conn().PgConn()
	if !t.begun || pc.IsClosed() || pc.TxStatus() == 'I' {
		t.conn.Release()
		return
	}
	t.db.ends.Add(1)
	go func() {
		defer t.db.ends.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), endTimeout)
		defer cancel()
		// A connection still in a transaction after this (the end
		// failed) is closed by Release rather than handed out again.
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
		t.conn.Release()
	}()
}

// Get reads key, once per transaction: the snapshot answers a second
// read of a key as it answered the first, unless the transaction wrote
// the key since, and then it holds what the transaction wrote. vfs reads
// the same few records (a folder, its root) several times in one
// transaction, and each was a round trip.
func (t *txn) Get(key []byte) ([]byte, error) {
	if t.failed != nil {
		return nil, t.fail(t.failed)
	}
	k, known := t.known[string(key)]
	if known && !k.big {
		if !k.ok {
			return nil, kv.ErrNotFound
		}
		return bytes.Clone(k.v), nil
	}
	// Only a write of key itself must reach the database first, and
	// every write is known.
	var v []byte
	err := queryRow(t, known, &v, `SELECT v FROM berth_kv WHERE k = $1 AND `+live, key)
	if t.write {
		t.noteRead(key, err == nil)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		t.know(key, nil, false)
		return nil, kv.ErrNotFound
	}
	if err != nil {
		return nil, t.fail(err)
	}
	if v == nil {
		v = []byte{}
	}
	t.know(key, v, true)
	return bytes.Clone(v), nil
}

// queryRow reads the one column of the one row a query returns into dst,
// or returns pgx.ErrNoRows.
func queryRow(t *txn, flush bool, dst any, sql string, args ...any) error {
	rows, err := t.query(flush, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

func (t *txn) noteRead(key []byte, found bool) {
	m := &t.missing
	if found {
		m = &t.found
	}
	if *m == nil {
		*m = make(map[string]struct{})
	}
	(*m)[string(key)] = struct{}{}
}

// writable checks that t may write n more bytes.
func (t *txn) writable(n int) error {
	if !t.write {
		return kv.ErrReadOnly
	}
	if t.failed != nil {
		return t.fail(t.failed)
	}
	t.bytes += int64(n)
	if t.bytes > t.db.maxBytes {
		return fmt.Errorf("%w: more than %d bytes written", kv.ErrTxnTooBig, t.db.maxBytes)
	}
	t.wrote = true
	return nil
}

const upsert = `INSERT INTO berth_kv (k, v, expires_at) VALUES ($1, $2, %s)
	ON CONFLICT (k) DO UPDATE SET v = excluded.v, expires_at = excluded.expires_at`

var (
	// setSQL leaves a row that already holds the value as it is. vfs
	// writes some keys with the same value in most of its transactions
	// (G/<folder>, empty, by every one that saves a child of the folder),
	// and PostgreSQL fails any transaction that updates a row another
	// one updated since its snapshot: every two uploads into one folder
	// at once conflicted, where nothing they read differed. A write of
	// what a key holds changes nothing any transaction reads, so
	// leaving it out keeps every order of them serializable. The row is
	// still locked until the commit, as by the update.
	setSQL = fmt.Sprintf(upsert, "NULL") + `
	WHERE berth_kv.v <> excluded.v OR berth_kv.expires_at IS NOT NULL`
	setTTLSQL = fmt.Sprintf(upsert, "now() + INTERVAL '1 microsecond' * $3::INT8")
)

// Set queues the write (see queue); it keeps copies of key and value, so
// callers may reuse them.
func (t *txn) Set(key, value []byte) error {
	if err := t.writable(len(key) + len(value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // NULL is not a value
	}
	value = bytes.Clone(value)
	t.queue(setSQL, bytes.Clone(key), value)
	t.know(key, value, true)
	return nil
}

// SetTTL keeps the deadline as the database's time: every node reads it
// against the same clock.
func (t *txn) SetTTL(key, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("kv: SetTTL with non-positive ttl %v", ttl)
	}
	if err := t.writable(len(key) + len(value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	value = bytes.Clone(value)
	t.queue(setTTLSQL, bytes.Clone(key), value, ttl.Microseconds())
	// Live for the rest of the transaction: expiry is checked against
	// now(), the transaction's start.
	t.know(key, value, true)
	return nil
}

func (t *txn) Delete(key []byte) error {
	if err := t.writable(len(key)); err != nil {
		return err
	}
	t.queue(`DELETE FROM berth_kv WHERE k = $1`, bytes.Clone(key))
	t.know(key, nil, false)
	return nil
}

// pendingWrite is a statement not yet sent (see txn.queue).
type pendingWrite struct {
	sql  string
	args []any
}

// queue keeps a write (args[0] its key) to send with the commit, or with
// the first read that must see it (a Get of a key too large to keep in
// known, a scan of a range that holds it; see batch): writes go in the
// round trip of a read or of the commit rather than one each. Sent at
// the commit, they hold the rows they lock for that round trip only, so
// a transaction waiting on one of those locks waits less. A write the
// database refuses fails the read it went with, or the commit.
func (t *txn) queue(sql string, args ...any) {
	t.pending = append(t.pending, pendingWrite{sql, args})
	for _, a := range args {
		if b, ok := a.([]byte); ok {
			t.pendingBytes += len(b)
		}
	}
}

// commit ends an Update's transaction: the writes still queued, the
// checks of finish when it wrote, and COMMIT, in one round trip (with
// BEGIN too, for a transaction that only wrote). One that read nothing
// and wrote nothing costs none.
func (t *txn) commit() error {
	if !t.wrote && !t.begun {
		return nil
	}
	// Cursors left to close close with the transaction.
	t.control = nil
	b := t.batch(true)
	if t.wrote {
		t.finish(b)
	}
	b.Queue("COMMIT")
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		return err
	}
	return nil
}

// finish adds to b what a write transaction does before its commit: it
// checks its point reads and moves Generation.
//
// The check makes a transaction fail if a key it read was changed by a
// transaction that committed after it began, as kv/badger's does.
// PostgreSQL's serializable isolation alone would commit it, ordered
// before the other (which is serializable too), and kv's callers were
// written against first-committer-wins. Keys read with a value are
// locked FOR SHARE: at REPEATABLE READ and above, locking a row that a
// later commit changed or deleted fails with 40001. Keys read without one
// are inserted, ON CONFLICT DO NOTHING, inside a savepoint that is rolled
// back: meeting a row that a later commit inserted fails with 40001 the
// same way. Scans are not checked: their ranges are left to the
// database's serializable isolation.
func (t *txn) finish(b *pgx.Batch) {
	if len(t.found) > 0 {
		b.Queue(`SELECT k FROM berth_kv WHERE k = ANY($1) FOR SHARE`, keys(t.found))
	}
	if len(t.missing) > 0 {
		b.Queue(`SAVEPOINT berth_validate`)
		b.Queue(`INSERT INTO berth_kv (k, v) SELECT x, ''::BYTEA FROM unnest($1::BYTEA[]) AS x
			ON CONFLICT (k) DO NOTHING`, keys(t.missing))
		b.Queue(`ROLLBACK TO SAVEPOINT berth_validate`)
	}
	b.Queue(`UPDATE berth_kv_gen SET n = n + 1 WHERE shard = $1`, t.db.genShard())
}

func keys(m map[string]struct{}) [][]byte {
	out := make([][]byte, 0, len(m))
	for k := range m {
		out = append(out, []byte(k))
	}
	return out
}

func (t *txn) Scan(prefix, start []byte, fn func(key, value []byte) error) error {
	lo := prefix
	if len(start) >= len(prefix) && bytes.Compare(start, prefix) > 0 {
		lo = start
	}
	return t.scan(false, lo, prefixEnd(prefix), false, fn)
}

func (t *txn) ScanReverse(prefix, start []byte, fn func(key, value []byte) error) error {
	switch {
	case len(start) < len(prefix) || (!bytes.HasPrefix(start, prefix) && bytes.Compare(start, prefix) > 0):
		// From the end of the prefix (nil: there is none, every key
		// after prefix has it).
		return t.scan(true, prefix, prefixEnd(prefix), false, fn)
	case bytes.Compare(start, prefix) < 0:
		return nil // start is before every key with the prefix
	default:
		return t.scan(true, prefix, start, true, fn)
	}
}

// scan calls fn for the keys from lo to hi (lo included; hi included
// when hiIncl, and a nil hi is open), in ascending or, when reverse,
// descending order, a batch at a time: a scan holds one batch in memory
// however many keys it visits, and fn may use the transaction between
// batches.
//
// The first batch is a query with a LIMIT, which ends most scans (a
// folder's few children, a lookup that stops at the first key) in one
// round trip. The rest comes through a cursor rather than a query per
// batch ("k > last ORDER BY k LIMIT n"): for those the planner, whose row
// estimates for a key range are often far off (a fresh table, a folder
// that grew), chose a bitmap scan of the whole range and a sort for
// every batch, which made a scan of a large prefix quadratic (100,000
// keys took 1.2 s, 0.3 s through a cursor). A cursor's plan is chosen for
// its first rows (cursor_tuple_fraction): the ordered index scan.
//
// The cursor's DECLARE goes with its first FETCH, and its CLOSE with the
// transaction's next statement, so a scan costs a round trip per batch
// and no more. Cursors are named by how many are open (scans nest when
// fn scans), and the batches grow through a few fixed sizes, so the
// statements repeat and the connection's statement cache prepares each
// once, not once per scan.
func (t *txn) scan(reverse bool, lo, hi []byte, hiIncl bool, fn func(key, value []byte) error) error {
	if t.failed != nil {
		return t.fail(t.failed)
	}
	// Writes fn makes between batches wait in the queue: the cursor reads
	// the snapshot of its DECLARE and would not see them.
	if lo == nil {
		lo = []byte{}
	}
	query := func() (string, []any) {
		q := `SELECT k, v FROM berth_kv WHERE k >= $1 AND ` + live
		args := []any{lo}
		if hi != nil {
			op := " AND k < $2"
			if hiIncl {
				op = " AND k <= $2"
			}
			q += op
			args = append(args, hi)
		}
		if reverse {
			return q + " ORDER BY k DESC", args
		}
		return q + " ORDER BY k", args
	}
	type pair struct{ k, v []byte }
	var batch []pair
	read := func(rows pgx.Rows, err error) error {
		if err != nil {
			return t.fail(err)
		}
		batch = batch[:0]
		for rows.Next() {
			var p pair
			if err := rows.Scan(&p.k, &p.v); err != nil {
				rows.Close()
				return t.fail(err)
			}
			if p.v == nil {
				p.v = []byte{}
			}
			batch = append(batch, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail(err)
		}
		return nil
	}
	// visit calls fn for the batch, and reports whether the scan is over.
	visit := func() (bool, error) {
		for _, p := range batch {
			if err := fn(p.k, p.v); err != nil {
				if errors.Is(err, kv.ErrStop) {
					return true, nil
				}
				return true, err
			}
		}
		return false, nil
	}

	q, args := query()
	if err := read(t.query(t.pendingIn(lo, hi, hiIncl), q+fmt.Sprintf(" LIMIT %d", scanBatchMin), args...)); err != nil {
		return err
	}
	if stop, err := visit(); stop || err != nil || len(batch) < scanBatchMin {
		return err
	}
	last := batch[len(batch)-1].k
	if reverse {
		hi, hiIncl = last, false
	} else {
		lo = append(last, 0) // the smallest key after last
	}
	q, args = query()
	t.cursors++
	cursor := fmt.Sprintf("berth_scan_%d", t.cursors)
	defer func() {
		t.cursors--
		if t.failed == nil {
			// The cursor would otherwise live, with its snapshot of the
			// scan, until the transaction ends.
			t.control = append(t.control, pendingWrite{"CLOSE " + cursor, nil})
		}
	}()
	// The cursor sees the writes fn made to its range so far, and none
	// it makes later.
	flush := t.pendingIn(lo, hi, hiIncl)
	t.control = append(t.control, pendingWrite{"DECLARE " + cursor + " NO SCROLL CURSOR FOR " + q, args})
	for limit := scanBatchMin * 2; ; limit = min(limit*2, scanBatchMax) {
		if err := read(t.query(flush, fmt.Sprintf("FETCH FORWARD %d FROM %s", limit, cursor))); err != nil {
			return err
		}
		flush = false
		stop, err := visit()
		if stop || err != nil || len(batch) < limit {
			return err
		}
	}
}

// prefixEnd returns the smallest key greater than every key with prefix,
// or nil if there is none (the prefix is empty or all 0xFF).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
