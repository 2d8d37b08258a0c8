// What the operator's manager runs: every controller is started and stopped the same way.
/** A part of the operator shaped like every other: started and stopped by the manager, on the leader or on all replicas. */
export interface Part {
  readonly name: string;
  /** Only the leader runs it; every replica runs the others. */
  readonly needsLeadership: boolean;
  start(): void;
  /** Stops its work; it may be started again (a replica that lost leadership and wins it back). */
  stop(): Promise<void>;
}
