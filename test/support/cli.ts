/** Line sinks for a command's `io`, and what was written to each. */
export function captureIo() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (line: string) => out.push(line), err: (line: string) => err.push(line) }, out, err }
}

/** Runs a command to completion; returns its exit code and output. */
export async function runProcess(cmd: string[], options: { env: Record<string, string | undefined>; cwd?: string }): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn(cmd, { cwd: options.cwd, env: options.env, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { code, stdout, stderr }
}
