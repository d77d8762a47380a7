// Config files for the model catalog route tests (test/routes/models*.test.ts): only listed, so
// the `local` backend is never called.

/** The `basic` plan, a `local` OpenAI-compatible provider, any further `providers` lines, then `models` (YAML). */
export function catalogFile(models: string, providers: string[] = []): string {
  return `plans:
  basic: { monthly_allowance: "0", fusion: false }
providers:
  - { id: local, type: openai-compatible, base_url: "http://127.0.0.1:9/v1", retention: none }
${providers.map(line => `${line}\n`).join('')}models:
${models}
`
}
