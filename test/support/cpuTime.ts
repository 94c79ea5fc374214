// What a piece of work costs in CPU time on this thread, not in wall time. A bound on the wall
// clock also counts the time other processes had the CPU, so on a loaded machine it fails by load;
// the thread's own CPU time is what the work costs, whatever else runs. For work that computes
// (a query, a body parsed and refused) on the test's thread: the app under `app.inject` and the
// embedded stores run there; a wait (a timer, another process) costs none and is not caught.

/** The CPU milliseconds this thread spent since `before` (a process.threadCpuUsage()). */
const cpuMsSince = (before: NodeJS.CpuUsage): number => {
  const used = process.threadCpuUsage(before);
  return (used.user + used.system) / 1000;
};

/** Runs `work` and answers its value and the CPU milliseconds this thread spent meanwhile. */
export async function cpuTimed<T>(work: () => Promise<T>): Promise<{ value: T; cpuMs: number }> {
  const before = process.threadCpuUsage();
  const value = await work();
  return { value, cpuMs: cpuMsSince(before) };
}

/** cpuTimed for work that does not wait (a regular expression run). */
export function cpuTimedSync<T>(work: () => T): { value: T; cpuMs: number } {
  const before = process.threadCpuUsage();
  const value = work();
  return { value, cpuMs: cpuMsSince(before) };
}
