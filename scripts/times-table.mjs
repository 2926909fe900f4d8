// What a run's CPU says: the table of files by wall and CPU that `node scripts/test.mjs --times` prints from
// test/file-times.json, and the line that ends a run: whether the files kept the cores busy or waited.

const seconds = (ms) => (ms / 1000).toFixed(1);

/**
 * The end of a run: its wall time, the sum of the files' walls, the files' CPU and that CPU over wall × cores. Near 1
 * the run was CPU-bound (more concurrency cannot help); well under 1 its files mostly waited (on real time, on
 * services), and more of them at a time would fill the cores.
 */
export function runSummary({ wallMs, fileWallMs, cpuMs, cores }) {
  const busy = cpuMs / (wallMs * cores);
  return (
    `${seconds(wallMs)} s wall, ${seconds(fileWallMs)} s the sum of the files' walls, ${seconds(cpuMs)} s the ` +
    `files' CPU; CPU ÷ (wall × ${cores} cores) = ${busy.toFixed(2)}\n`
  );
}

/**
 * What the services the files started and stopped cost (one JSON line each from test/support/service.ts): how many,
 * their CPU until ready (what a start costs) and until stopped, against the files' CPU.
 */
export function servicesSummary(lines, filesCpuMs) {
  const services = lines
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  if (!services.length) return '';
  const ready = services.reduce((sum, s) => sum + s.ready, 0);
  const total = services.reduce((sum, s) => sum + s.total, 0);
  const share = filesCpuMs > 0 ? ` (${((total * 100000) / filesCpuMs).toFixed(0)} % of the files' CPU)` : '';
  return (
    `${services.length} services stopped by their tests: ${ready.toFixed(1)} s of CPU until ready, ` +
    `${total.toFixed(1)} s until stopped${share}\n`
  );
}

/** The kept times as a table, slowest wall first: wall, CPU and CPU ÷ wall (the cores a file kept busy alone). */
export function timesTable(times, cpu) {
  const rows = [...times].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const column = (value, width) => String(value).padStart(width);
  let text = `${column('wall s', 8)} ${column('CPU s', 8)} ${column('CPU/wall', 8)}  file\n`;
  for (const [file, wallMs] of rows) {
    const cpuMs = cpu.get(file);
    const ratio = cpuMs === undefined ? '' : (cpuMs / wallMs).toFixed(2);
    text += `${column(seconds(wallMs), 8)} ${column(cpuMs === undefined ? '-' : seconds(cpuMs), 8)} `;
    text += `${column(ratio, 8)}  ${file}\n`;
  }
  const wallSum = rows.reduce((sum, [, ms]) => sum + ms, 0);
  const cpuSum = rows.reduce((sum, [file]) => sum + (cpu.get(file) ?? 0), 0);
  return `${text}${column(seconds(wallSum), 8)} ${column(seconds(cpuSum), 8)} ${column('', 8)}  sum over ${rows.length} files\n`;
}
