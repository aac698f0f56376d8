//! The fold: rows of buckets filtered, keyed and accumulated per group.
//!
//! Python reference: `SumState.add` (`query/expressions/reducers.py`: exact integer sums,
//! MongoDB's compensated double sum), `MinMaxAcc` (BSON order, the first row holding the
//! extreme wins), `FirstAcc`/`LastAcc`, `CountAcc` (`query/accumulators.py`), and
//! `$dateTrunc`'s UTC bins from 2000-01-01 (`columnar_group._row_groups`).
//!
//! A group is a (series class, time bin) pair; groups are numbered in the order their
//! first row is seen, which is the order the generic `$group` makes them in.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::bucket::{Rows, Val};
use super::Decline;

pub const REF_UTC_MS: i64 = 946_684_800_000; // $dateTrunc's reference point, 2000-01-01
const SAFE_TIME: i64 = 1 << 60;
const DAY_MS: i64 = 86_400_000;
const DAY_RANGE: (i64, i64) = (-62_135_596_800_000, 253_402_300_799_999); // years 1..9999

/// A comparison of a value with a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Cmp {
    pub fn parse(op: &str) -> Option<Cmp> {
        Some(match op {
            "$eq" => Cmp::Eq,
            "$gt" => Cmp::Gt,
            "$gte" => Cmp::Gte,
            "$lt" => Cmp::Lt,
            "$lte" => Cmp::Lte,
            _ => return None,
        })
    }

    fn holds(self, o: Ordering) -> bool {
        match self {
            Cmp::Eq => o == Ordering::Equal,
            Cmp::Gt => o == Ordering::Greater,
            Cmp::Gte => o != Ordering::Less,
            Cmp::Lt => o == Ordering::Less,
            Cmp::Lte => o != Ordering::Greater,
        }
    }
}

/// What an accumulator folds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    /// column `i` of the requested fields
    Field(usize),
    /// the time field
    Time,
    /// a constant (of `$sum`/`$avg`)
    Const(Val),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    Count,
    Sum,
    Min,
    Max,
    First,
    Last,
    /// `$stdDevPop`/`$stdDevSamp` (they differ only in their result)
    StdDev,
    /// `$top`/`$bottom`(`N`): the plan's `bests[i]`
    Best(usize),
}

/// What a `$top`/`$bottom`(`N`) keeps (`BestNAcc`): the `n` first rows (the last with
/// `largest`) ordered by `key` (in BSON order, reversed when `descending`), ties by
/// arrival; each as its `outs`' values (in an array when `listed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    pub key: Arg,
    pub descending: bool,
    pub largest: bool,
    pub n: usize,
    pub outs: Vec<Arg>,
    pub listed: bool,
}

impl Best {
    /// Whether (key `a`, arrival `sa`) comes before (`b`, `sb`).
    fn before(&self, a: Val, sa: u64, b: Val, sb: u64) -> bool {
        let o = cmp_bson(a, b);
        let o = if self.descending { o.reverse() } else { o };
        o.then(sa.cmp(&sb)) == Ordering::Less
    }
}

/// A row a `$top`/`$bottom` keeps: its key, its arrival and its outputs' values.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub key: Val,
    pub seq: u64,
    pub outs: Vec<Val>,
}

/// The shape of a supported `[$match] $group`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub time_field: String,
    pub fields: Vec<String>,
    pub time_preds: Vec<(Cmp, i64)>,
    /// (column, comparison, numeric constant): the row passes when the value is a number
    /// that compares so with the constant (type bracketing); a NaN value declines
    pub row_preds: Vec<(usize, Cmp, Val)>,
    /// `$or`s (`$in`s too, as `$or`s of `$eq`s): the row passes each when every predicate
    /// of one of its branches holds (as `row_preds`)
    pub row_ors: Vec<Vec<Vec<(usize, Cmp, Val)>>>,
    /// the `$top`/`$bottom`s of `AccOp::Best`
    pub bests: Vec<Best>,
    /// the `$dateTrunc` bin size in ms, when the `_id` has one
    pub bin_ms: Option<i64>,
    pub accs: Vec<(AccOp, Arg)>,
}

impl Plan {
    /// Whether rows are filtered by their values (not only by their times).
    pub fn filters_rows(&self) -> bool {
        !(self.row_preds.is_empty() && self.row_ors.is_empty())
    }
}

/// A partial `SumState` (`$sum`/`$avg`): integers exactly, doubles compensated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sum {
    pub ival: i128,
    pub nint: i64,
    pub long: bool,
    pub dbl: bool,
    pub fsum: f64,
    pub fcomp: f64,
    pub ndbl: i64,
}

impl Sum {
    fn add(&mut self, v: Val) -> Result<(), Decline> {
        match v {
            Val::Int32(i) => {
                self.ival += i as i128;
                self.nint += 1;
            }
            Val::Int64(i) => {
                self.ival += i as i128;
                self.nint += 1;
                self.long = true;
            }
            Val::Double(v) => {
                self.dbl = true;
                let s = self.fsum;
                let x = s + v;
                if x.is_finite() {
                    if s.abs() >= v.abs() {
                        self.fcomp += (s - x) + v;
                    } else {
                        self.fcomp += (v - x) + s;
                    }
                }
                self.fsum = x;
                self.ndbl += 1;
            }
            _ => {}
        }
        if self.ival.unsigned_abs() > (1u128 << 120) {
            return Err(Decline("an integer sum beyond 120 bits"));
        }
        Ok(())
    }
}

/// Welford's online variance (`StdDevAcc`): the numbers seen, their mean, and the sum of
/// squared differences from it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    pub n: i64,
    pub mean: f64,
    pub m2: f64,
}

impl Welford {
    fn add(&mut self, v: Val) {
        let x = match v {
            Val::Int32(i) => i as f64,
            Val::Int64(i) => i as f64,
            Val::Double(d) => d,
            _ => return, // not a number (bools and dates included)
        };
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }
}

/// A partial accumulator state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum State {
    Count(i64),
    Sum(Sum),
    Welford(Welford),
    /// `$top`/`$bottom`: its kept rows are the fold's `kept[i]` (ascending)
    Best(usize),
    /// min/max: the value kept (Missing: none yet)
    Pick(Val),
    /// first/last: the value kept, and whether a row was seen
    Seen(Val, bool),
}

/// A group: its series class, its bin start (ms; 0 without a bin), the meta value (its
/// number) of the bucket whose row made it, for its `_id`, and its states.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub class: i32,
    pub bin_start: i64,
    pub first_meta: usize,
    pub states: Vec<State>,
}

/// The fold over buckets, fed in scan order.
#[derive(Debug)]
pub struct Fold {
    pub plan: Plan,
    pub groups: Vec<Group>,
    index: HashMap<(i32, i64), usize>,
    /// the times the time predicates let pass: [first, last] (empty when first > last)
    times: (i64, i64),
    /// (row, group) of the rows of the bucket being fed that pass the filter (reused)
    picked: Vec<(u32, u32)>,
    pub rows_passed: u64,
    pub columns_decoded: u64,
    pub buckets: usize,
    /// the rows of each `State::Best`
    pub kept: Vec<Vec<Kept>>,
    /// the arrival number of the first row of the bucket being fed, and of the next's
    base: u64,
    next_base: u64,
}

/// BSON order of two numbers: NaN below every number and equal to itself, int and double
/// compared exactly.
pub fn cmp_num(a: Val, b: Val) -> Option<Ordering> {
    let i = |v: Val| match v {
        Val::Int32(x) => Some(x as i64),
        Val::Int64(x) => Some(x),
        _ => None,
    };
    Some(match (a, b) {
        (Val::Double(x), Val::Double(y)) => match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => x.partial_cmp(&y)?,
        },
        (Val::Double(x), _) => cmp_int_double(i(b)?, x)?.reverse(),
        (_, Val::Double(y)) => cmp_int_double(i(a)?, y)?,
        _ => i(a)?.cmp(&i(b)?),
    })
}

fn cmp_int_double(i: i64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return Some(Ordering::Greater);
    }
    if d >= 9_223_372_036_854_775_808.0 {
        return Some(Ordering::Less);
    }
    if d < -9_223_372_036_854_775_808.0 {
        return Some(Ordering::Greater);
    }
    let t = d.trunc();
    let ti = t as i64; // exact: |t| < 2^63
    Some(match i.cmp(&ti) {
        Ordering::Equal => 0.0f64.partial_cmp(&(d - t))?,
        o => o,
    })
}

/// BSON canonical class of a value kept by `$min`/`$max` (numbers < bool < date).
fn class_of(v: Val) -> u8 {
    match v {
        Val::Int32(_) | Val::Int64(_) | Val::Double(_) => 1,
        Val::Bool(_) => 2,
        Val::Date(_) => 3,
        Val::Missing | Val::Null => 0,
    }
}

/// The order of two present values of `$min`/`$max`.
fn cmp_bson(a: Val, b: Val) -> Ordering {
    let (ca, cb) = (class_of(a), class_of(b));
    if ca != cb {
        return ca.cmp(&cb);
    }
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => x.cmp(&y),
        (Val::Date(x), Val::Date(y)) => x.cmp(&y),
        _ => cmp_num(a, b).unwrap_or(Ordering::Equal),
    }
}

impl Fold {
    pub fn new(plan: Plan) -> Result<Fold, Decline> {
        if let Some(size) = plan.bin_ms {
            if size <= 0 || size >= SAFE_TIME {
                return Err(Decline("a bin size out of range"));
            }
        }
        Ok(Fold {
            times: time_range(&plan.time_preds),
            plan,
            groups: Vec::new(),
            index: HashMap::new(),
            picked: Vec::new(),
            rows_passed: 0,
            columns_decoded: 0,
            buckets: 0,
            kept: Vec::new(),
            base: 0,
            next_base: 0,
        })
    }

    fn new_states(&mut self) -> Vec<State> {
        let kept = &mut self.kept;
        self.plan
            .accs
            .iter()
            .map(|(op, _)| match op {
                AccOp::Count => State::Count(0),
                AccOp::Sum => State::Sum(Sum::default()),
                AccOp::Min | AccOp::Max => State::Pick(Val::Missing),
                AccOp::First | AccOp::Last => State::Seen(Val::Missing, false),
                AccOp::StdDev => State::Welford(Welford::default()),
                AccOp::Best(_) => {
                    kept.push(Vec::new());
                    State::Best(kept.len() - 1)
                }
            })
            .collect()
    }

    fn bin(&self, t: i64) -> Result<i64, Decline> {
        let Some(size) = self.plan.bin_ms else {
            return Ok(0);
        };
        if !(-SAFE_TIME..=SAFE_TIME).contains(&t)
            || (size % DAY_MS == 0 && !(DAY_RANGE.0..=DAY_RANGE.1).contains(&t))
        {
            return Err(Decline("a time out of the bin range"));
        }
        Ok(REF_UTC_MS + (t - REF_UTC_MS).div_euclid(size) * size)
    }

    fn row_passes(&self, rows: &Rows, r: usize) -> Result<bool, Decline> {
        let t = rows.times[r];
        if t < self.times.0 || t > self.times.1 {
            return Ok(false);
        }
        for &pred in &self.plan.row_preds {
            if !holds(rows, r, pred)? {
                return Ok(false);
            }
        }
        for branches in &self.plan.row_ors {
            let mut any = false;
            for branch in branches {
                let mut all = true;
                for &pred in branch {
                    if !holds(rows, r, pred)? {
                        all = false;
                        break;
                    }
                }
                if all {
                    any = true;
                    break;
                }
            }
            if !any {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The range of times sharing `t`'s bin and its checks (`bin`): [start, end).
    fn bin_range(&self, t: i64) -> Result<(i64, i64, i64), Decline> {
        let bin = self.bin(t)?;
        let Some(size) = self.plan.bin_ms else {
            return Ok((bin, i64::MIN, i64::MAX));
        };
        let (lo, hi) = if size % DAY_MS == 0 {
            (DAY_RANGE.0, DAY_RANGE.1)
        } else {
            (-SAFE_TIME, SAFE_TIME)
        };
        Ok((bin, bin.max(lo), (bin + size).min(hi + 1)))
    }

    /// The group of (class, bin), made on first sight.
    fn group_of(&mut self, class: i32, bin: i64, meta: usize) -> usize {
        if let Some(&g) = self.index.get(&(class, bin)) {
            return g;
        }
        let g = self.groups.len();
        let states = self.new_states();
        self.groups.push(Group {
            class,
            bin_start: bin,
            first_meta: meta,
            states,
        });
        self.index.insert((class, bin), g);
        g
    }

    /// Folds the rows of a bucket of meta value number `meta` and series class `class`:
    /// first the rows passing the filter, each with its group, then each accumulator over
    /// them (one dispatch per accumulator and bucket, not per row).
    pub fn feed(&mut self, meta: usize, class: i32, rows: &Rows) -> Result<(), Decline> {
        self.buckets += 1;
        self.columns_decoded += 1 + rows.columns.len() as u64;
        self.base = self.next_base;
        self.next_base += rows.times.len() as u64;
        if let Some(g) = self.one_group(class, meta, rows)? {
            // every row passes and shares a group: no per-row filter, bin or pick
            let n = rows.times.len() as u32;
            self.rows_passed += n as u64;
            return self.fold_group(g, rows, 0..n);
        }
        let mut picked = std::mem::take(&mut self.picked);
        picked.clear();
        // consecutive rows mostly share a bin: no division or hashing for them
        let mut current: Option<(i64, i64, usize)> = None; // [start, end) and group
        for r in 0..rows.times.len() {
            if !self.row_passes(rows, r)? {
                continue;
            }
            let t = rows.times[r];
            let g = match current {
                Some((start, end, g)) if start <= t && t < end => g,
                _ => {
                    let (bin, start, end) = self.bin_range(t)?;
                    let g = self.group_of(class, bin, meta);
                    current = Some((start, end, g));
                    g
                }
            };
            picked.push((r as u32, g as u32));
        }
        self.rows_passed += picked.len() as u64;
        let result = self.accumulate(rows, &picked);
        self.picked = picked;
        result
    }

    /// The group of every row of a bucket, when all pass the filter and share one: no
    /// row predicate, and the first and last times within the time predicates and one bin.
    fn one_group(
        &mut self,
        class: i32,
        meta: usize,
        rows: &Rows,
    ) -> Result<Option<usize>, Decline> {
        if self.plan.filters_rows() || rows.times.is_empty() {
            return Ok(None);
        }
        let (lo, hi) = rows
            .times
            .iter()
            .fold((i64::MAX, i64::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        if lo < self.times.0 || hi > self.times.1 {
            return Ok(None);
        }
        let (bin, start, end) = self.bin_range(lo)?;
        if !(start <= lo && hi < end) {
            return Ok(None);
        }
        Ok(Some(self.group_of(class, bin, meta)))
    }

    /// Each accumulator over the picked rows, a run of rows of one group at a time: the
    /// group's state is looked up once a run, and folded in a local copy.
    fn accumulate(&mut self, rows: &Rows, picked: &[(u32, u32)]) -> Result<(), Decline> {
        let mut i = 0;
        while i < picked.len() {
            let g = picked[i].1;
            let mut j = i + 1;
            while j < picked.len() && picked[j].1 == g {
                j += 1;
            }
            self.fold_group(g as usize, rows, picked[i..j].iter().map(|&(r, _)| r))?;
            i = j;
        }
        Ok(())
    }

    /// Each accumulator of group `g` over rows `run` of the bucket being fed.
    fn fold_group(
        &mut self,
        g: usize,
        rows: &Rows,
        run: impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + Clone,
    ) -> Result<(), Decline> {
        let Fold {
            groups,
            plan,
            kept,
            base,
            ..
        } = self;
        for (state, &(op, arg)) in groups[g].states.iter_mut().zip(&plan.accs) {
            match (op, *state) {
                (AccOp::Best(b), State::Best(slot)) => {
                    fold_best(&mut kept[slot], &plan.bests[b], rows, run.clone(), *base)
                }
                _ => fold_arg(state, op, arg, rows, run.clone())?,
            }
        }
        Ok(())
    }
}

/// A row's value of `arg`.
fn arg_value(arg: Arg, rows: &Rows, r: u32) -> Val {
    match arg {
        Arg::Field(c) => rows.columns[c][r as usize],
        Arg::Time => Val::Date(rows.times[r as usize]),
        Arg::Const(v) => v,
    }
}

/// A `$top`/`$bottom`'s kept rows (ascending) after rows `run` of a bucket whose first row
/// arrived `base`-th: as `BestNAcc.offer`, the `n` first (or last) by key, then arrival.
fn fold_best(
    list: &mut Vec<Kept>,
    spec: &Best,
    rows: &Rows,
    run: impl Iterator<Item = u32>,
    base: u64,
) {
    for r in run {
        let key = arg_value(spec.key, rows, r);
        let seq = base + r as u64;
        let pos = list.partition_point(|k| spec.before(k.key, k.seq, key, seq));
        let full = list.len() >= spec.n;
        let at = if !full {
            pos
        } else if spec.largest && pos > 0 {
            list.remove(0);
            pos - 1
        } else if !spec.largest && pos < list.len() {
            list.pop();
            pos
        } else {
            continue;
        };
        let outs = spec.outs.iter().map(|&a| arg_value(a, rows, r)).collect();
        list.insert(at, Kept { key, seq, outs });
    }
}

/// One accumulator's state over rows `run` of a bucket (all of one group). The argument's
/// kind is matched once a run, not once a row as `arg_value` does: each loop of
/// `fold_run` is compiled for one kind.
fn fold_arg(
    state: &mut State,
    op: AccOp,
    arg: Arg,
    rows: &Rows,
    run: impl DoubleEndedIterator<Item = u32> + ExactSizeIterator,
) -> Result<(), Decline> {
    match arg {
        Arg::Field(c) => fold_run(state, op, run, |r| rows.columns[c][r as usize]),
        Arg::Time => fold_run(state, op, run, |r| Val::Date(rows.times[r as usize])),
        Arg::Const(v) => fold_run(state, op, run, |_| v),
    }
}

/// Whether row `r`'s value of column `c` is a number comparing with `k` as `op` says (a NaN
/// value declines).
fn holds(rows: &Rows, r: usize, (c, op, k): (usize, Cmp, Val)) -> Result<bool, Decline> {
    let v = rows.columns[c][r];
    match v {
        Val::Double(d) if d.is_nan() => Err(Decline("NaN in a filtered field")),
        Val::Int32(_) | Val::Int64(_) | Val::Double(_) => {
            let o = cmp_num(v, k).ok_or(Decline("an uncomparable constant"))?;
            Ok(op.holds(o))
        }
        _ => Ok(false),
    }
}

/// The times every predicate lets pass, as an inclusive range (first > last: none).
fn time_range(preds: &[(Cmp, i64)]) -> (i64, i64) {
    let (mut first, mut last) = (i64::MIN, i64::MAX);
    for &(op, ms) in preds {
        let (lo, hi) = match op {
            Cmp::Eq => (ms, ms),
            Cmp::Gt => match ms.checked_add(1) {
                Some(lo) => (lo, i64::MAX),
                None => (i64::MAX, i64::MIN),
            },
            Cmp::Gte => (ms, i64::MAX),
            Cmp::Lt => match ms.checked_sub(1) {
                Some(hi) => (i64::MIN, hi),
                None => (i64::MAX, i64::MIN),
            },
            Cmp::Lte => (i64::MIN, ms),
        };
        first = first.max(lo);
        last = last.min(hi);
    }
    (first, last)
}

/// One accumulator's state over a run of rows (`value` reads a row's argument).
fn fold_run(
    state: &mut State,
    op: AccOp,
    mut run: impl DoubleEndedIterator<Item = u32> + ExactSizeIterator,
    value: impl Fn(u32) -> Val,
) -> Result<(), Decline> {
    match (op, state) {
        (AccOp::Count, State::Count(n)) => *n += run.len() as i64,
        (AccOp::Sum, State::Sum(s)) => {
            let mut local = *s;
            for r in run {
                local.add(value(r))?;
            }
            *s = local;
        }
        (AccOp::StdDev, State::Welford(w)) => {
            let mut local = *w;
            for r in run {
                local.add(value(r));
            }
            *w = local;
        }
        (AccOp::Min | AccOp::Max, State::Pick(kept)) => {
            let want = if op == AccOp::Max {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            let mut local = *kept;
            for r in run {
                let v = value(r);
                if class_of(v) == 0 {
                    continue;
                }
                if matches!(local, Val::Missing) || cmp_bson(v, local) == want {
                    local = v;
                }
            }
            *kept = local;
        }
        (AccOp::First, State::Seen(kept, seen)) if !*seen => {
            if let Some(r) = run.next() {
                *kept = value(r);
                *seen = true;
            }
        }
        (AccOp::Last, State::Seen(kept, seen)) => {
            if let Some(r) = run.next_back() {
                *kept = value(r);
                *seen = true;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(accs: Vec<(AccOp, Arg)>, bin_ms: Option<i64>) -> Plan {
        Plan {
            time_field: "t".into(),
            fields: vec!["x".into()],
            time_preds: vec![],
            row_preds: vec![],
            row_ors: vec![],
            bests: vec![],
            bin_ms,
            accs,
        }
    }

    fn rows(times: Vec<i64>, x: Vec<Val>) -> Rows {
        Rows {
            times,
            columns: vec![x],
        }
    }

    #[test]
    fn time_predicates_become_one_range() {
        let each =
            |preds: &[(Cmp, i64)], t: i64| preds.iter().all(|&(op, ms)| op.holds(t.cmp(&ms)));
        let ops = [Cmp::Eq, Cmp::Gt, Cmp::Gte, Cmp::Lt, Cmp::Lte];
        let points = [i64::MIN, i64::MIN + 1, -5, 0, 3, 7, i64::MAX - 1, i64::MAX];
        for &a in &ops {
            for &b in &ops {
                for &x in &points {
                    for &y in &points {
                        let preds = [(a, x), (b, y)];
                        let (first, last) = time_range(&preds);
                        for &t in &points {
                            assert_eq!(each(&preds, t), first <= t && t <= last, "{preds:?} {t}");
                        }
                    }
                }
            }
        }
        assert_eq!(time_range(&[]), (i64::MIN, i64::MAX));
    }

    #[test]
    fn numbers_compare_exactly() {
        use Val::*;
        assert_eq!(
            cmp_num(Int64(1 << 53 | 1), Double(9007199254740992.0)),
            Some(Ordering::Greater)
        );
        assert_eq!(cmp_num(Int32(2), Double(2.5)), Some(Ordering::Less));
        assert_eq!(cmp_num(Int32(-3), Double(-2.5)), Some(Ordering::Less));
        assert_eq!(cmp_num(Double(f64::NAN), Int32(-5)), Some(Ordering::Less));
        assert_eq!(
            cmp_num(Double(f64::NAN), Double(f64::NAN)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            cmp_num(Int64(i64::MAX), Double(9.3e18)),
            Some(Ordering::Less)
        );
        assert_eq!(cmp_num(Int32(3), Double(3.0)), Some(Ordering::Equal));
        assert_eq!(cmp_num(Bool(true), Int32(1)), None);
    }

    #[test]
    fn max_keeps_the_first_row_of_the_extreme_and_orders_types() {
        use Val::*;
        let mut f = Fold::new(plan(
            vec![(AccOp::Max, Arg::Field(0)), (AccOp::Min, Arg::Field(0))],
            None,
        ))
        .unwrap();
        f.feed(
            0,
            0,
            &rows(
                vec![1, 2, 3, 4, 5],
                vec![Int32(3), Double(3.0), Null, Double(f64::NAN), Missing],
            ),
        )
        .unwrap();
        assert_eq!(f.groups.len(), 1);
        assert_eq!(f.groups[0].states[0], State::Pick(Int32(3)));
        assert!(matches!(f.groups[0].states[1], State::Pick(Double(d)) if d.is_nan()));
        f.feed(1, 0, &rows(vec![6, 7], vec![Bool(false), Date(-1)]))
            .unwrap();
        assert_eq!(f.groups[0].states[0], State::Pick(Date(-1)));
    }

    #[test]
    fn sums_are_exact_and_compensated() {
        use Val::*;
        let mut f = Fold::new(plan(
            vec![(AccOp::Sum, Arg::Field(0)), (AccOp::Count, Arg::Time)],
            None,
        ))
        .unwrap();
        f.feed(
            0,
            0,
            &rows(
                vec![0, 0, 0, 0, 0],
                vec![
                    Int64(i64::MAX),
                    Int64(i64::MAX),
                    Double(0.1),
                    Double(1e100),
                    Bool(true),
                ],
            ),
        )
        .unwrap();
        let State::Sum(s) = f.groups[0].states[0] else {
            panic!()
        };
        assert_eq!(s.ival, 2 * i64::MAX as i128);
        assert_eq!((s.nint, s.ndbl, s.long, s.dbl), (2, 2, true, true));
        assert_eq!(s.fsum, 0.1 + 1e100);
        assert_eq!(s.fcomp, (1e100 - (0.1 + 1e100)) + 0.1);
        assert_eq!(f.groups[0].states[1], State::Count(5));
    }

    #[test]
    fn groups_by_class_and_bin_in_first_seen_order() {
        use Val::*;
        let mut p = plan(
            vec![(AccOp::First, Arg::Field(0)), (AccOp::Last, Arg::Time)],
            Some(60_000),
        );
        p.time_preds = vec![(Cmp::Gte, REF_UTC_MS)];
        p.row_preds = vec![(0, Cmp::Gt, Int32(1))];
        let mut f = Fold::new(p).unwrap();
        let t = REF_UTC_MS;
        f.feed(
            0,
            5,
            &rows(
                vec![t + 61_000, t - 1, t + 1, t + 2],
                vec![Int32(2), Int32(9), Double(1.5), Int64(7)],
            ),
        )
        .unwrap();
        f.feed(1, 2, &rows(vec![t], vec![Int32(1)])).unwrap();
        f.feed(2, 2, &rows(vec![t + 5], vec![Double(2.0)])).unwrap();
        let got: Vec<_> = f
            .groups
            .iter()
            .map(|g| (g.class, g.bin_start - t, g.first_meta))
            .collect();
        assert_eq!(got, vec![(5, 60_000, 0), (5, 0, 0), (2, 0, 2)]);
        assert_eq!(f.groups[1].states[0], State::Seen(Double(1.5), true));
        assert_eq!(f.groups[1].states[1], State::Seen(Date(t + 2), true));
        assert_eq!(f.rows_passed, 4);
    }

    #[test]
    fn a_bucket_of_one_group_folds_as_row_by_row() {
        use Val::*;
        let accs = vec![
            (AccOp::Sum, Arg::Field(0)),
            (AccOp::Min, Arg::Field(0)),
            (AccOp::First, Arg::Field(0)),
            (AccOp::Last, Arg::Time),
            (AccOp::Count, Arg::Time),
        ];
        let t = REF_UTC_MS + 120_000;
        let buckets = [
            rows(
                vec![t + 5, t, t + 59_999],
                vec![Int32(3), Double(0.5), Int64(-2)],
            ),
            rows(vec![t + 59_999, t + 60_000], vec![Int32(1), Int32(4)]), // two bins
            rows(vec![t - 1, t + 1], vec![Double(7.0), Int32(6)]),        // starts before
            rows(vec![t + 3], vec![Double(-1.5)]),
        ];
        let fold = |row_by_row: bool| {
            let mut p = plan(accs.clone(), Some(60_000));
            p.time_preds = vec![(Cmp::Gte, t)];
            if row_by_row {
                // a predicate every row here passes: the rows go one by one
                p.row_preds = vec![(0, Cmp::Gte, Double(f64::NEG_INFINITY))];
            }
            let mut f = Fold::new(p).unwrap();
            for (i, b) in buckets.iter().enumerate() {
                f.feed(i % 2, 0, b).unwrap();
            }
            (f.groups, f.rows_passed)
        };
        let whole = fold(false);
        assert_eq!(whole, fold(true));
        assert_eq!(whole.1, 7);
        assert_eq!(
            whole.0[0].states[0],
            State::Sum(Sum {
                ival: 8,
                nint: 4,
                long: true,
                dbl: true,
                fsum: -1.0,
                fcomp: 0.0,
                ndbl: 2
            })
        );
    }

    #[test]
    fn declines_nan_in_a_filter_and_bins_out_of_range() {
        use Val::*;
        let mut p = plan(vec![(AccOp::Count, Arg::Time)], None);
        p.row_preds = vec![(0, Cmp::Lt, Int32(1))];
        let mut f = Fold::new(p).unwrap();
        assert!(f
            .feed(0, 0, &rows(vec![0], vec![Double(f64::NAN)]))
            .is_err());
        let mut f = Fold::new(plan(vec![(AccOp::Count, Arg::Time)], Some(DAY_MS))).unwrap();
        assert!(f
            .feed(0, 0, &rows(vec![DAY_RANGE.1 + 1], vec![Null]))
            .is_err());
        assert_eq!(f.bin(REF_UTC_MS - 1), Ok(REF_UTC_MS - DAY_MS));
    }
}
