/** Thrown for a request this adapter cannot express; provider.ts turns it into a `bad-request`. */
export class UnsupportedRequestError extends Error {
  constructor(
    message: string,
    /** The request field to blame, named as Chat Completions names it (each dialect renames it: renameParam). */
    readonly param?: string,
  ) {
    super(message)
  }
}
