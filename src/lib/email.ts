/** An email address as the gateway takes one (users, owners, the bootstrap owner): trimmed and lower-cased first. */
export const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/

/** Whether `email`, trimmed and lower-cased, is an address. */
export function isEmail(email: string): boolean {
  return EMAIL.test(email.trim().toLowerCase())
}
