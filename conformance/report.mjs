// Reads what the conformance suite left behind for one run (its stdout and the
// checks.json files of its -o directory), once run directly against the
// upstream and once through the gateway in each mode, prints one table, and
// judges every side against the run's baseline. Run with the pinned Node 22:
//
//   node report.mjs run --name r2 --title TEXT [--short TEXT] --baseline FILE
//        [--direct DIR --direct-log FILE --direct-rc N [--direct-suite-baseline]]
//        [--gateway-mode MODE --gateway DIR --gateway-log FILE --gateway-rc N
//         [--gateway-exited 'NAME...']]...
//        [--summary FILE.jsonl]
//   node report.mjs summary FILE.jsonl
//
// Each gateway side is named by its mode (embedded, cluster); its five
// options are given together, once per mode. --gateway-exited names the
// processes of that mode (gateway and upstreams) that had exited once its
// suite ended (an empty value: none); any such process fails the side.
//
// A check fails when its status is FAILURE or WARNING, as in the suite's own
// --expected-failures evaluation; repeated check ids within a scenario count
// once, at their worst status. The totals are the suite's: SUCCESS and FAILURE
// checks, every one counted.
//
// Direct side (strict): every failure is in the baseline, every baseline entry
// fails, and the suite itself, given the baseline, exited 0. Gateway side (one
// per mode): every failure is in the baseline, every scenario the direct side
// ran was run, and none of its processes exited; a baseline entry that passes
// through the gateway is only reported. With two or more modes, the table
// also lists the checks failing in one mode and not in another.
//
// Exit status: 0 when every side given is judged ok, 1 otherwise, 2 on misuse.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';

const BAD = new Set(['FAILURE', 'WARNING']);
const RANK = { FAILURE: 3, WARNING: 2, SUCCESS: 1 };

function fail(msg) {
  console.error(`report: ${msg}`);
  process.exit(2);
}

// readBaseline returns {whole: Map scenario->reason, checks: Map "scenario:id"->reason}.
// The file is the suite's expected-failures YAML (a `server:` list of
// '<scenario>' or '<scenario>:<check-id>'); each entry must carry its reason as
// a trailing comment on its line.
function readBaseline(file) {
  const doc = YAML.parseDocument(fs.readFileSync(file, 'utf8'));
  if (doc.errors.length) fail(`${file}: ${doc.errors[0].message}`);
  const whole = new Map();
  const checks = new Map();
  const seq = doc.get('server', true);
  if (seq == null) return { whole, checks };
  if (!YAML.isSeq(seq)) fail(`${file}: 'server' must be a list`);
  for (const item of seq.items) {
    const v = YAML.isScalar(item) ? String(item.value ?? '') : '';
    const reason = (item?.comment ?? '').trim();
    if (!v || typeof item.value === 'object') fail(`${file}: entry ${JSON.stringify(item?.toJSON?.() ?? item)} is not '<scenario>' or '<scenario>:<check-id>'`);
    if (!reason) fail(`${file}: entry '${v}' has no reason (add '# why the upstream fails it' on its line)`);
    const i = v.indexOf(':');
    const map = i === -1 ? whole : checks;
    if (map.has(v)) fail(`${file}: entry '${v}' is listed twice`);
    map.set(v, reason);
  }
  for (const k of checks.keys()) {
    const s = k.slice(0, k.indexOf(':'));
    if (whole.has(s)) fail(`${file}: '${k}' is redundant with the whole-scenario entry '${s}'`);
  }
  return { whole, checks };
}

// readSide returns the scenarios the suite ran, in its order, each with its
// raw checks, plus the suite's own totals line.
function readSide(dir, log) {
  const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
  const order = [];
  const summary = new Map();
  let totals = null;
  let inSummary = false;
  for (const line of text.split('\n')) {
    if (/^=== (SUITE )?SUMMARY ===/.test(line)) inSummary = true;
    const m = inSummary && line.match(/^[✓✗] (\S+): (\d+) passed, (\d+) failed/u);
    if (m) {
      order.push(m[1]);
      summary.set(m[1], { passed: +m[2], failed: +m[3] });
    }
    const t = line.match(/^Total: (\d+) passed, (\d+) failed/);
    if (t) totals = { passed: +t[1], failed: +t[2] };
  }
  const checks = new Map();
  if (fs.existsSync(dir)) {
    for (const e of fs.readdirSync(dir).sort()) {
      const m = e.match(/^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/);
      const f = path.join(dir, e, 'checks.json');
      if (!m || !fs.existsSync(f)) continue;
      if (checks.has(m[1])) fail(`${dir}: scenario ${m[1]} has two result directories`);
      checks.set(m[1], JSON.parse(fs.readFileSync(f, 'utf8')));
      if (!summary.has(m[1])) order.push(m[1]);
    }
  }
  // A scenario the suite could not run leaves no checks.json; the suite
  // counts it as one failed check named after the scenario, and so do we.
  for (const s of order) {
    if (!checks.has(s)) {
      checks.set(s, [{ id: s, status: 'FAILURE', errorMessage: 'scenario did not complete (no checks.json; see the suite log)' }]);
    }
  }
  return { order, checks, totals, finished: totals !== null };
}

function dedupe(checks) {
  const worst = new Map();
  for (const c of checks) {
    if (c.status === 'INFO') continue;
    const prev = worst.get(c.id);
    if (!prev || (RANK[c.status] ?? 0) >= (RANK[prev.status] ?? 0)) worst.set(c.id, c);
  }
  return worst;
}

// judge classifies one side against the baseline.
function judge(side, baseline) {
  const per = new Map();
  const unexpected = [];
  const expected = [];
  const passing = []; // baseline entries whose check or scenario passes on this side
  const seen = new Set(); // baseline entries observed failing
  let passed = 0;
  let failed = 0;
  let warnings = 0;
  for (const s of side.order) {
    const raw = side.checks.get(s);
    const p = raw.filter((c) => c.status === 'SUCCESS').length;
    const f = raw.filter((c) => c.status === 'FAILURE').length;
    const w = raw.filter((c) => c.status === 'WARNING').length;
    passed += p;
    failed += f;
    warnings += w;
    const worst = dedupe(raw);
    const bad = [...worst.values()].filter((c) => BAD.has(c.status));
    let nUnexpected = 0;
    if (baseline.whole.has(s)) {
      if (bad.length) {
        seen.add(s);
        expected.push(s);
      } else passing.push(s);
    } else {
      for (const c of bad) {
        const key = `${s}:${c.id}`;
        if (baseline.checks.has(key)) {
          seen.add(key);
          expected.push(key);
        } else {
          nUnexpected++;
          unexpected.push({ key, status: c.status, msg: c.errorMessage ?? c.description ?? '' });
        }
      }
      for (const [key] of baseline.checks) {
        if (!key.startsWith(`${s}:`)) continue;
        if (worst.get(key.slice(s.length + 1))?.status === 'SUCCESS') passing.push(key);
      }
    }
    const status = bad.length === 0 ? 'pass' : nUnexpected ? 'FAIL' : 'base';
    per.set(s, { status, p, f, w });
  }
  const unseen = [...baseline.whole.keys(), ...baseline.checks.keys()].filter((k) => !seen.has(k));
  return { per, unexpected, expected, passing, unseen, passed, failed, warnings };
}

// shorten keeps a check's message to one line; wire-schema failures quote the
// whole offending message after ' — message:', which the table leaves out.
function shorten(msg) {
  const m = msg.replace(/ — message: [\s\S]*$/, '').replace(/\s+/g, ' ');
  return m.length > 220 ? `${m.slice(0, 217)}...` : m;
}

function cell(r) {
  if (!r) return '-';
  return `${r.status} ${r.p}/${r.f}${r.w ? ` w${r.w}` : ''}`;
}

function totalsLine(j) {
  return `${j.passed} passed, ${j.failed} failed${j.warnings ? `, ${j.warnings} warnings` : ''}`;
}

function cmdRun(argv) {
  const { values: o } = parseArgs({
    args: argv,
    options: {
      name: { type: 'string' },
      title: { type: 'string', default: '' },
      short: { type: 'string' },
      baseline: { type: 'string' },
      direct: { type: 'string' },
      'direct-log': { type: 'string' },
      'direct-rc': { type: 'string' },
      'direct-suite-baseline': { type: 'boolean', default: false },
      'gateway-mode': { type: 'string', multiple: true, default: [] },
      gateway: { type: 'string', multiple: true, default: [] },
      'gateway-log': { type: 'string', multiple: true, default: [] },
      'gateway-rc': { type: 'string', multiple: true, default: [] },
      'gateway-exited': { type: 'string', multiple: true, default: [] },
      summary: { type: 'string' },
    },
  });
  if (!o.name || !o.baseline) fail('run needs --name and --baseline');
  const baseline = readBaseline(o.baseline);
  const sides = {};
  if (o.direct) sides.direct = { ...readSide(o.direct, o['direct-log']), rc: Number(o['direct-rc'] ?? NaN) };
  const modes = o['gateway-mode'];
  for (const k of ['gateway', 'gateway-log', 'gateway-rc']) {
    if (o[k].length !== modes.length) fail(`run needs one --${k} per --gateway-mode`);
  }
  if (o['gateway-exited'].length && o['gateway-exited'].length !== modes.length) fail('run needs one --gateway-exited per --gateway-mode, or none');
  const exited = {};
  modes.forEach((m, i) => {
    if (m === 'direct' || sides[m]) fail(`gateway mode '${m}' is given twice or is named 'direct'`);
    sides[m] = { ...readSide(o.gateway[i], o['gateway-log'][i]), rc: Number(o['gateway-rc'][i]) };
    exited[m] = (o['gateway-exited'][i] ?? '').trim();
  });
  if (!Object.keys(sides).length) fail('run needs --direct or --gateway-mode');
  const j = {};
  for (const [k, s] of Object.entries(sides)) j[k] = judge(s, baseline);

  const names = [];
  for (const s of Object.values(sides)) for (const n of s.order) if (!names.includes(n)) names.push(n);
  const w = Math.max(8, ...names.map((n) => n.length));
  const cols = Object.keys(sides);
  const out = [];
  const nEntries = baseline.whole.size + baseline.checks.size;
  out.push(`== ${o.name}: ${o.title}`);
  out.push(`   baseline ${path.basename(o.baseline)} (${nEntries} entries)`);
  out.push(`${'scenario'.padEnd(w)}  ${cols.map((c) => c.padEnd(16)).join('  ')}`.trimEnd());
  for (const n of names) {
    out.push(`${n.padEnd(w)}  ${cols.map((c) => cell(j[c].per.get(n)).padEnd(16)).join('  ')}`.trimEnd());
  }
  out.push('   (cell: pass | base = every failure in the baseline | FAIL = a failure not in it; passed/failed checks, wN = warnings)');

  const verdict = {};
  for (const c of cols) {
    const s = sides[c];
    const jj = j[c];
    const problems = [];
    if (!s.finished) problems.push(`the suite did not finish (exit ${s.rc}; see ${c}.log)`);
    if (s.totals && (s.totals.passed !== jj.passed || s.totals.failed !== jj.failed)) {
      problems.push(`suite totals ${s.totals.passed}/${s.totals.failed} differ from checks.json ${jj.passed}/${jj.failed}`);
    }
    if (jj.unexpected.length) problems.push(`${jj.unexpected.length} failing checks not in the baseline`);
    if (c === 'direct') {
      if (jj.unseen.length) problems.push(`${jj.unseen.length} baseline entries the upstream does not fail`);
      if (o['direct-suite-baseline'] && s.rc !== 0) problems.push(`the suite, given the baseline, exited ${s.rc}`);
    }
    if (c !== 'direct' && exited[c]) problems.push(`processes of this mode exited: ${exited[c]}`);
    if (c !== 'direct' && sides.direct) {
      const missing = sides.direct.order.filter((n) => !s.order.includes(n));
      if (missing.length) problems.push(`scenarios not run through the gateway: ${missing.join(', ')}`);
    }
    verdict[c] = problems;
    out.push(`${(c + ':').padEnd(9)}${totalsLine(jj)}  ->  ${problems.length ? `FAIL: ${problems.join('; ')}` : 'ok'}`);
    if (jj.unexpected.length) {
      out.push(`   not in the baseline (${c}):`);
      for (const u of jj.unexpected) out.push(`     ${u.key}  ${u.status}  ${shorten(u.msg)}`);
    }
    if (c === 'direct' && jj.unseen.length) {
      out.push('   baseline entries the upstream does not fail directly (remove them):');
      for (const k of jj.unseen) out.push(`     ${k}`);
    }
    if (c !== 'direct' && jj.passing.length) {
      out.push(`   baseline entries that pass through the gateway (${jj.passing.length}; the upstream fails them directly):`);
      for (const k of jj.passing) out.push(`     ${k}`);
    }
  }
  // Between modes: the checks failing in one and not in another.
  const failingKeys = (jj) => new Set([...jj.unexpected.map((u) => u.key), ...jj.expected]);
  if (modes.length > 1) {
    const keys = Object.fromEntries(modes.map((m) => [m, failingKeys(j[m])]));
    const diffs = [];
    for (const a of modes) {
      for (const b of modes) {
        if (a === b) continue;
        const only = [...keys[a]].filter((k) => !keys[b].has(k));
        if (only.length) diffs.push(`   failing in ${a}, not in ${b}: ${only.join(', ')}`);
      }
    }
    out.push(diffs.length ? `modes:   differ\n${diffs.join('\n')}` : `modes:   the same failing checks in ${modes.join(' and ')}`);
  }
  console.log(out.join('\n') + '\n');

  const ok = cols.every((c) => verdict[c].length === 0);
  if (o.summary) {
    const rec = { name: o.name, title: o.title, short: o.short ?? o.title, sides: cols, ok };
    for (const c of cols) {
      const jj = j[c];
      rec[c] = {
        passed: jj.passed,
        failed: jj.failed,
        warnings: jj.warnings,
        ok: verdict[c].length === 0,
        problems: verdict[c],
        failingScenarios: [...jj.per].filter(([, r]) => r.status === 'FAIL').map(([n]) => n),
      };
    }
    fs.appendFileSync(o.summary, JSON.stringify(rec) + '\n');
  }
  process.exit(ok ? 0 : 1);
}

function cmdSummary([file]) {
  if (!file) fail('summary needs a FILE.jsonl');
  const recs = fs.existsSync(file)
    ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    : [];
  const cols = [];
  for (const r of recs) for (const c of r.sides ?? ['direct', 'gateway']) if (r[c] && !cols.includes(c)) cols.push(c);
  const fmt = (s) => (s ? `${s.passed} passed, ${s.failed} failed${s.warnings ? `, ${s.warnings} w` : ''}${s.ok ? '' : ' !'}` : '-');
  const wn = Math.max(3, ...recs.map((r) => r.name.length));
  const what = (r) => r.short ?? r.title;
  const wt = Math.max(5, ...recs.map((r) => what(r).length));
  const modes = cols.filter((c) => c !== 'direct');
  const out = [`== conformance summary (! = judged FAIL; gateway modes: ${modes.length ? modes.join(', ') : 'none'})`];
  out.push(`${'run'.padEnd(wn)}  ${'what'.padEnd(wt)}  ${cols.map((c) => c.padEnd(28)).join('  ')}`.trimEnd());
  for (const r of recs) out.push(`${r.name.padEnd(wn)}  ${what(r).padEnd(wt)}  ${cols.map((c) => fmt(r[c]).padEnd(28)).join('  ')}`.trimEnd());
  for (const r of recs) {
    for (const c of cols) {
      if (r[c]?.failingScenarios?.length) out.push(`${r.name} ${c}: failing outside the baseline: ${r[c].failingScenarios.join(', ')}`);
    }
  }
  // Failing sides named as run/side (r2/cluster), grouped by run.
  const bad = recs.filter((r) => !r.ok).map((r) => {
    const sides = cols.filter((c) => r[c] && !r[c].ok);
    return sides.length ? sides.map((c) => `${r.name}/${c}`).join(' ') : r.name;
  });
  const modeText = modes.length ? `, modes ${modes.join(', ')}` : ', direct only';
  out.push(bad.length ? `conformance: FAIL (${bad.join(' ')})` : `conformance: ok (${recs.length} runs${modeText})`);
  console.log(out.join('\n'));
  process.exit(bad.length || !recs.length ? 1 : 0);
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'run') cmdRun(rest);
else if (cmd === 'summary') cmdSummary(rest);
else fail(`unknown command ${JSON.stringify(cmd)} (run, summary)`);
