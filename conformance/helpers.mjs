// Small process helpers for conformance/run.sh, run with the pinned Node 22.
//
//   node helpers.mjs ports N                  N free TCP ports on 127.0.0.1, space-separated
//   node helpers.mjs wait-http URL SECONDS    until URL answers any HTTP status
//   node helpers.mjs wait-tcp HOST:PORT SECONDS
//                                             until HOST:PORT accepts a TCP connection
//   node helpers.mjs wait-gateway BASE SECONDS NAME...
//                                             until BASE/readyz is 200 and a
//                                             2026-07-28 tools/list on every
//                                             BASE/mcp/NAME lists at least one tool
//
// Exit 0 when the condition holds, 1 with a message on stderr when it does not.
import net from 'node:net';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePorts(n) {
  // Hold every listener open until all are chosen, so the N ports differ.
  const servers = [];
  const ports = [];
  for (let i = 0; i < n; i++) {
    const s = net.createServer();
    await new Promise((res, rej) => {
      s.once('error', rej);
      s.listen(0, '127.0.0.1', res);
    });
    servers.push(s);
    ports.push(s.address().port);
  }
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

async function until(what, seconds, probe) {
  const deadline = Date.now() + seconds * 1000;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const r = await probe();
      if (r === true) return;
      last = String(r);
    } catch (e) {
      last = e?.cause?.code ?? e?.message ?? String(e);
    }
    await sleep(100);
  }
  throw new Error(`${what}: not ready after ${seconds}s (last: ${last})`);
}

async function toolsListed(url) {
  const body = {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/list',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Mcp-Protocol-Version': '2026-07-28',
      'Mcp-Method': 'tools/list',
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  // Either a JSON body or an SSE stream whose data: lines carry the response.
  const payloads = text.trimStart().startsWith('{')
    ? [text]
    : text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5));
  for (const p of payloads) {
    try {
      const msg = JSON.parse(p);
      if (msg.id === 1 && Array.isArray(msg.result?.tools) && msg.result.tools.length > 0) return true;
      if (msg.id === 1 && msg.error) return `HTTP ${res.status} error ${msg.error.code} ${msg.error.message}`;
    } catch {
      // not JSON: keep looking
    }
  }
  return `HTTP ${res.status}, no tools yet`;
}

const [cmd, ...args] = process.argv.slice(2);
try {
  switch (cmd) {
    case 'ports':
      console.log((await freePorts(Number(args[0] ?? 1))).join(' '));
      break;
    case 'wait-http': {
      const [url, secs] = args;
      await until(url, Number(secs), async () => {
        await fetch(url, { signal: AbortSignal.timeout(2000) });
        return true;
      });
      break;
    }
    case 'wait-tcp': {
      const [addr, secs] = args;
      const i = addr.lastIndexOf(':');
      const host = addr.slice(0, i);
      const port = Number(addr.slice(i + 1));
      await until(addr, Number(secs), () => new Promise((res, rej) => {
        const c = net.connect({ host, port });
        c.setTimeout(2000, () => c.destroy(new Error('connect timeout')));
        c.once('connect', () => { c.end(); res(true); });
        c.once('error', rej);
      }));
      break;
    }
    case 'wait-gateway': {
      const [base, secs, ...names] = args;
      await until(`${base}/readyz`, Number(secs), async () => {
        const r = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2000) });
        return r.status === 200 ? true : `HTTP ${r.status}`;
      });
      for (const n of names) await until(`${base}/mcp/${n} tools/list`, Number(secs), () => toolsListed(`${base}/mcp/${n}`));
      break;
    }
    default:
      throw new Error(`unknown command ${JSON.stringify(cmd)} (ports, wait-http, wait-tcp, wait-gateway)`);
  }
} catch (e) {
  console.error(`helpers: ${e.message}`);
  process.exit(1);
}
