//! The fold's groups as results: their output order under a fused `$sort` and each
//! accumulator's value, typed as the generic `$group` gives it.
//!
//! Python reference: `SumState.total`/`SumState.average` (`query/expressions/reducers.py`:
//! the narrowest type holding an integer sum, int64 once an int64 was summed, a double
//! once a double was; the average a double, null for no number), `int_or_long` (`$count`),
//! the min/max/first/last accumulators (null for none or missing), `StdDevAcc` (null
//! without a number, or for a sample of one), and
//! `query/timeseries/group_order.py` (`FusedSort`: stable, the bin ordered by its start,
//! the other keys by the rank the generic sort gives each meta value's `_id` there).

use std::cmp::Ordering;

use super::bucket::Val;
use super::group::{Group, State, Sum};
use super::Decline;

/// A key of a fused `$sort`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderKey {
    /// the bin's start
    Bin { descending: bool },
    /// a rank by meta value number (the direction is in the ranks)
    Meta(Vec<u32>),
}

/// How an accumulator's state becomes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Count,
    Total,
    Average,
    /// the value kept by `$min`/`$max`/`$first`/`$last`
    Kept,
    StdDevPop,
    StdDevSamp,
    /// `$top`/`$bottom`: the first kept row's output (made from the fold's kept rows)
    Best,
    /// `$topN`/`$bottomN`: the kept rows' outputs
    BestN,
}

/// The groups' indexes in output order: by `keys` (the first decides, ties keep the
/// first-seen order), or first-seen order without keys.
pub fn ordered(groups: &[Group], keys: &[OrderKey]) -> Result<Vec<usize>, Decline> {
    for k in keys {
        if let OrderKey::Meta(ranks) = k {
            if groups.iter().any(|g| g.first_meta >= ranks.len()) {
                return Err(Decline("a meta value without a sort rank"));
            }
        }
    }
    let mut idx: Vec<usize> = (0..groups.len()).collect();
    if keys.is_empty() {
        return Ok(idx);
    }
    idx.sort_by(|&a, &b| {
        let (ga, gb) = (&groups[a], &groups[b]);
        for k in keys {
            let o = match k {
                OrderKey::Bin { descending } => {
                    let o = ga.bin_start.cmp(&gb.bin_start);
                    if *descending {
                        o.reverse()
                    } else {
                        o
                    }
                }
                OrderKey::Meta(ranks) => ranks[ga.first_meta].cmp(&ranks[gb.first_meta]),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    Ok(idx)
}

/// MongoDB's createIntOrLong.
fn int_or_long(n: i64) -> Val {
    match i32::try_from(n) {
        Ok(i) => Val::Int32(i),
        Err(_) => Val::Int64(n),
    }
}

/// A sum's total as a double: its integers' exact sum, its doubles' compensated one.
fn double_total(s: &Sum) -> f64 {
    if s.fsum.is_finite() {
        s.ival as f64 + (s.fsum + s.fcomp)
    } else {
        s.fsum + s.ival as f64
    }
}

/// The value of an accumulator's state, `Null` for null (None: the state is not of that
/// accumulator).
pub fn finish(how: Finish, state: &State) -> Option<Val> {
    Some(match (how, state) {
        (Finish::Count, State::Count(n)) => int_or_long(*n),
        (Finish::Total, State::Sum(s)) => {
            if s.dbl {
                Val::Double(double_total(s))
            } else {
                match i64::try_from(s.ival) {
                    Ok(i) if s.long => Val::Int64(i),
                    Ok(i) => int_or_long(i),
                    Err(_) => Val::Double(s.ival as f64),
                }
            }
        }
        (Finish::Average, State::Sum(s)) => match s.nint + s.ndbl {
            0 => Val::Null,
            n => Val::Double(double_total(s) / n as f64),
        },
        (Finish::Kept, State::Pick(v) | State::Seen(v, _)) => match v {
            Val::Missing => Val::Null,
            v => *v,
        },
        (Finish::StdDevPop, State::Welford(w)) => match w.n {
            0 => Val::Null,
            n => Val::Double((w.m2 / n as f64).sqrt()),
        },
        (Finish::StdDevSamp, State::Welford(w)) => match w.n {
            0 | 1 => Val::Null,
            n => Val::Double((w.m2 / (n - 1) as f64).sqrt()),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::group::Welford;
    use super::*;

    fn group(bin_start: i64, first_meta: usize) -> Group {
        Group {
            class: 0,
            bin_start,
            first_meta,
            states: vec![],
        }
    }

    #[test]
    fn orders_stably_by_each_key_in_turn() {
        let gs = [
            group(5, 0),
            group(3, 1),
            group(5, 1),
            group(3, 0),
            group(4, 2),
        ];
        assert_eq!(ordered(&gs, &[]).unwrap(), vec![0, 1, 2, 3, 4]);
        let by_bin = [OrderKey::Bin { descending: false }];
        assert_eq!(ordered(&gs, &by_bin).unwrap(), vec![1, 3, 4, 0, 2]);
        let down = [OrderKey::Bin { descending: true }];
        assert_eq!(ordered(&gs, &down).unwrap(), vec![0, 2, 4, 1, 3]);
        // metas 0 and 2 tie: the bin decides between them
        let both = [
            OrderKey::Meta(vec![1, 0, 1]),
            OrderKey::Bin { descending: false },
        ];
        assert_eq!(ordered(&gs, &both).unwrap(), vec![1, 2, 3, 4, 0]);
        assert!(ordered(&gs, &[OrderKey::Meta(vec![0, 0])]).is_err());
    }

    #[test]
    fn results_take_the_generic_types() {
        let sum = |ival: i128, long: bool, dbl: bool, fsum: f64, n: i64| {
            State::Sum(Sum {
                ival,
                nint: n,
                long,
                dbl,
                fsum,
                fcomp: 0.0,
                ndbl: dbl as i64,
            })
        };
        let total = |s: &State| finish(Finish::Total, s).unwrap();
        assert_eq!(total(&sum(7, false, false, 0.0, 2)), Val::Int32(7));
        assert_eq!(
            total(&sum(1 << 40, false, false, 0.0, 2)),
            Val::Int64(1 << 40)
        );
        assert_eq!(total(&sum(7, true, false, 0.0, 2)), Val::Int64(7));
        assert_eq!(
            total(&sum(1 << 70, true, false, 0.0, 2)),
            Val::Double(2f64.powi(70))
        );
        assert_eq!(total(&sum(1, false, true, 0.5, 1)), Val::Double(1.5));
        assert_eq!(
            finish(Finish::Total, &sum(1, false, true, f64::INFINITY, 1)),
            Some(Val::Double(f64::INFINITY))
        );
        assert_eq!(
            finish(Finish::Average, &sum(3, false, true, 0.0, 2)),
            Some(Val::Double(1.0))
        );
        assert_eq!(
            finish(Finish::Average, &sum(0, false, false, 0.0, 0)),
            Some(Val::Null)
        );
        assert_eq!(
            finish(Finish::Count, &State::Count(1 << 31)),
            Some(Val::Int64(1 << 31))
        );
        assert_eq!(
            finish(Finish::Kept, &State::Pick(Val::Missing)),
            Some(Val::Null)
        );
        assert_eq!(
            finish(Finish::Kept, &State::Seen(Val::Date(-3), true)),
            Some(Val::Date(-3))
        );
        assert_eq!(finish(Finish::Count, &State::Pick(Val::Null)), None);
        let mut w = Welford::default();
        assert_eq!(
            finish(Finish::StdDevPop, &State::Welford(w)),
            Some(Val::Null)
        );
        w.n = 1;
        assert_eq!(
            finish(Finish::StdDevSamp, &State::Welford(w)),
            Some(Val::Null)
        );
        w = Welford {
            n: 4,
            mean: 2.5,
            m2: 5.0,
        };
        assert_eq!(
            finish(Finish::StdDevPop, &State::Welford(w)),
            Some(Val::Double(1.25f64.sqrt()))
        );
        assert_eq!(
            finish(Finish::StdDevSamp, &State::Welford(w)),
            Some(Val::Double((5.0f64 / 3.0).sqrt()))
        );
    }
}
