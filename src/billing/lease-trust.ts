/**
 * Until when no other instance can have swept this boot's leases (ARCHITECTURE.md §7.5: an
 * instance is swept once its heartbeat is `instance_stale_after_s` old), and how to make sure
 * again: the sweeper's heartbeat, which finds a swept lease gone (Ledger.leaseLost). A process
 * paused past that age resumes with settlements ready before its timer's beat has run; they
 * confirm first, so none draws on a lease another instance has returned and spent.
 */
export class LeaseTrust {
  trustedUntilMs = 0

  constructor(private readonly heartbeat: () => Promise<unknown>) {}

  /**
   * Whether this boot's leases are still its own at `asOfMs`: heartbeats, a few tries, until one
   * vouches past that instant (a beat already in flight when the process paused vouches only for
   * its own older time; a beat may fail, a busy lock, a server's blip). False when none could.
   */
  async confirm(asOfMs: number): Promise<boolean> {
    for (let tries = 0; tries < 3 && asOfMs >= this.trustedUntilMs; tries++) {
      try {
        await this.heartbeat()
      } catch {
        // tried again; the caller refuses to settle on leases it could not confirm
      }
    }
    return asOfMs < this.trustedUntilMs
  }
}
