"""Compare p-value variants (scale: MAD or SD of the logs; floor: none, m/(n+1), (m-1)/(n+1)) on
the outputs of labelled trees: how many normal runs of each history fail when judged against
the others (the calibration files), and the targets' run accuracy.

    python bench/compare_pvalue_variants.py example=.:data/example/target_labels.json \
        hpc=build/hpc:../shared/data/hpc/target_labels.json ...

Each tree must hold the outputs of control_charts, detect and report of this code.  The chart
resolution is approximated by 0.01 and stacking's by 0.05 (the stages use 1/intervals and
1/models), so the figures are close to, not equal to, the stages' own.  It chose
``pvalues.calibrated_pvalue``'s scale and floor.
"""
import glob
import json
import math
import sys

import numpy as np
from scipy.stats import t as student


def pv(score, null, res, scale, floor_mode):
    values = np.asarray(null, float); n = values.size
    if n < 2: return float('nan')
    if score <= 0: return 1.0
    m_ex = float(np.sum(values >= score))
    floor = {'none': 0.0, 'm': m_ex/(n+1), 'm-1': max(0.0, m_ex-1)/(n+1)}[floor_mode]
    pos = values[values > 0]; k = pos.size
    share = (k + 1) / (n + 1) if k < n else 1.0
    if k < 2: return max(share, floor)
    logs = np.log(pos + res); y = math.log(score + res)
    if scale == 'mad':
        m = float(np.median(logs)); s = 1.4826 * float(np.median(np.abs(logs - m)))
        if s <= 0: s = float(logs.std(ddof=1))
    else:
        m = float(logs.mean()); s = float(logs.std(ddof=1))
    if s <= 0: return max(floor, share * (1.0 if y <= m else 1/(k+1)))
    return max(floor, share * float(student.sf((y - m) / (s * math.sqrt(1 + 1/k)), df=k-1)))
sets = {a.split('=', 1)[0]: tuple(a.split('=', 1)[1].split(':', 1)) for a in sys.argv[1:]}
for scale in ('mad', 'sd'):
    for fm in ('none', 'm', 'm-1'):
        line = []
        tot_cal_fail = tot_cal = 0
        for name, (root, labf) in sets.items():
            lab = json.load(open(labf)); ok = nf = nn = fc = nfault = 0
            ccal = {f.split('/')[-1][:-5]: json.load(open(f)) for f in glob.glob(root + '/data/processed/control_charts/calibration/*.json')}
            scal = {f.split('/')[-1][:-5]: json.load(open(f)) for f in glob.glob(root + '/data/processed/stacking_calibration/*.json')}
            # calibration self-consistency (normal runs LOO)
            for sysname, c in ccal.items():
                ns, ws = c['normal_scores'], c['window_scores']; ss = scal.get(sysname, {}).get('normal_scores', {})
                for r in ns:
                    p1 = pv(ns[r], [v for q, v in ns.items() if q != r], 0.01, scale, fm)
                    p2 = pv(ws[r], [v for q, v in ws.items() if q != r], 0.01, scale, fm)
                    ps = [min(1, 2*min(p1, p2))]
                    if r in ss: ps.append(pv(ss[r], [v for q, v in ss.items() if q != r], 0.05, scale, fm))
                    ps = [p for p in ps if np.isfinite(p)]
                    tot_cal += 1; tot_cal_fail += min(1, len(ps)*min(ps)) <= 0.05
            for f in glob.glob(root + '/reports/runs/*.json'):
                d = json.load(open(f)); r = d['run_id']
                if r not in lab: continue
                cc = d['methods'].get('control_charts', {}); st = d['methods']['association_rules_stacking']
                c = ccal[d['system']]; ps = []
                if cc.get('violation_ratio') is not None:
                    p1 = pv(cc['violation_ratio'], list(c['normal_scores'].values()), 0.01, scale, fm)
                    p2 = pv(cc['window_ratio'], list(c['window_scores'].values()), 0.01, scale, fm)
                    ps.append(min(1, 2*min(p1, p2)))
                if st.get('score') is not None and d['system'] in scal:
                    ps.append(pv(st['score'], list(scal[d['system']]['normal_scores'].values()), 0.05, scale, fm))
                ps = [p for p in ps if np.isfinite(p)]
                fail = min(1, len(ps)*min(ps)) <= 0.05 if ps else False
                truth = lab[r]['verdict']
                ok += (fail == (truth == 'fail'))
                if truth == 'pass': nn += 1; nf += fail
                else: nfault += 1; fc += fail
            line.append(f"{name} {ok/(nn+nfault):.3f} ({nf}/{nn} n, {fc}/{nfault} f)")
        print(f"{scale:3} {fm:4} | " + " | ".join(line) + f" | calib LOO normal failed {tot_cal_fail}/{tot_cal}")
