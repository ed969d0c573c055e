/**
 * Per-seed simulation parameters ("swarm testing"): each seed draws its own cluster size, protocol
 * options, network and disk behaviour, driver model and fault mix, and about 30% of seeds run an
 * election-storm profile.
 */
import type { SeededRandom } from '../random.js';

const MAX_MEMBERS = 7;

export interface SimParams {
  storm: boolean;
  /** Initial voters (1..7: single-voter and two-voter clusters are drawn on purpose). */
  voters: number;
  /** Initial learners, bootstrapped with the voters. */
  learners: number;
  /** Membership changes never take the voter count below this. */
  minVoters: number;
  /**
   * Driver model: a Ready that changes nothing but the commit index is not synced (like the LevelDB log's
   * mustSync), so a crash can lose the persisted commit; a restart raises it to the applied index.
   */
  lazyCommit: boolean;
  /**
   * Driver model: each applied membership is recorded durably (DurableLog.setConf); a restart starts the core
   * with it and skips conf entries at or below it when they are handed out again.
   */
  recordConf: boolean;
  /**
   * Driver model: chance that the application durably records its state (and applied index) after applying
   * a batch. A restart resumes from it when it is ahead of the snapshot. 0: the application restores from
   * the snapshot. Only with recordConf (the core must start with the membership as of that index).
   */
  appPersistRate: number;
  /**
   * Driver model: deferred snapshots (RaftNodeOptions.snapshotDeferred). A snapshot makes the application's state
   * durable and records only its index; one with bytes is taken when the core asks (takeSnapshotRequest). Only
   * with recordConf (a restart resumes from the application's own state).
   */
  deferredSnapshots: boolean;
  /**
   * Driver model: one batch in flight (RaftNodeOptions.holdWhileCommitting). A proposal made to a leader whose
   * appended entries are not all committed and applied waits, with the others made meanwhile, until they are,
   * and they are then proposed together; held proposals are refused (never proposed) when the node stops leading
   * or crashes.
   */
  holdWhileCommitting: boolean;
  electionTicks: number;
  heartbeatTicks: number;
  preVote: boolean;
  checkQuorum: boolean;
  maxMsgBytes: number;
  maxInflightMsgs: number;
  maxUncommittedBytes: number;
  snapshotChunkBytes: number;
  maxCommittedBytesPerReady: number;
  tickMs: number;
  delayMinMs: number;
  delayMaxMs: number;
  lossRate: number;
  dupRate: number;
  slowRate: number;
  clockSkewRate: number;
  diskMaxMs: number;
  chaosMs: number;
  chaosIntervalMs: number;
  proposalPadMax: number;
  snapshotFillerMax: number;
  maxMembers: number;
  pPropose: number;
  pRead: number;
  pPartition: number;
  pCrash: number;
  pConf: number;
  pTransfer: number;
  pSnapshot: number;
  pPause: number;
  pauseMaxMs: number;
  pNewLeaderFault: number;
  pNewCandidateFault: number;
}

export function deriveParams(rng: SeededRandom, chaosMs: number | undefined): SimParams {
  const electionTicks = rng.range(5, 15);
  const tickMs = 10;
  const delayMinMs = rng.range(1, 5);
  const diskMaxMs = rng.pick([0, 2, 10]);
  // Raft needs a round trip well below the election timeout (broadcastTime << electionTimeout).
  const delaySpreadMax = Math.max(1, Math.floor((electionTicks * tickMs) / 4) - delayMinMs - diskMaxMs);
  const swarm = (p: number, enabledChance: number) => (rng.chance(enabledChance) ? p * (0.5 + rng.float()) : 0);
  const size = rng.float();
  const voters = size < 0.12 ? 1 : size < 0.22 ? 2 : rng.range(3, 7);
  const learners = Math.min(
    MAX_MEMBERS - voters,
    voters <= 2 ? rng.pick([0, 0, 1, 2]) : rng.chance(0.15) ? rng.range(1, 2) : 0,
  );
  const recordConf = rng.chance(0.5);
  const base: SimParams = {
    storm: false,
    voters,
    learners,
    minVoters: rng.pick([1, 2, 3]),
    lazyCommit: rng.chance(0.5),
    recordConf,
    appPersistRate: recordConf ? rng.pick([0, 0.3, 1]) : 0,
    electionTicks,
    heartbeatTicks: rng.range(1, Math.min(3, electionTicks - 1)),
    preVote: rng.chance(0.8),
    checkQuorum: rng.chance(0.8),
    maxMsgBytes: rng.pick([48, 256, 1024, 1 << 20]),
    maxInflightMsgs: rng.range(1, 8),
    maxUncommittedBytes: rng.pick([64, 1024, 1 << 20]),
    snapshotChunkBytes: rng.pick([64, 100, 512, 1 << 16]),
    maxCommittedBytesPerReady: rng.pick([40, 512, 1 << 20]),
    tickMs,
    delayMinMs,
    delayMaxMs: delayMinMs + rng.range(1, delaySpreadMax),
    lossRate: rng.pick([0, 0.01, 0.05, 0.15]),
    dupRate: rng.pick([0, 0.01, 0.05]),
    slowRate: rng.pick([0, 0.01, 0.05]),
    clockSkewRate: rng.pick([0, 0.5]),
    diskMaxMs,
    chaosMs: chaosMs ?? rng.range(2000, 5000),
    chaosIntervalMs: 10,
    proposalPadMax: rng.pick([0, 16, 120]),
    snapshotFillerMax: rng.pick([0, 60, 2000]),
    maxMembers: MAX_MEMBERS,
    pPropose: swarm(0.35, 0.95),
    pRead: swarm(0.05, 0.6),
    pPartition: swarm(0.012, 0.75),
    pCrash: swarm(0.006, 0.75),
    pConf: swarm(0.012, 0.6),
    pTransfer: swarm(0.005, 0.5),
    pSnapshot: swarm(0.02, 0.7),
    pPause: swarm(0.005, 0.5),
    pauseMaxMs: 800,
    pNewLeaderFault: rng.pick([0, 0.1, 0.3]),
    pNewCandidateFault: rng.pick([0, 0.05, 0.2]),
    deferredSnapshots: recordConf && rng.chance(0.5),
    holdWhileCommitting: rng.chance(0.5),
  };
  if (!rng.chance(0.3)) return base;
  // Election storm: small clusters, small messages, leaders failing right after election, short stalls.
  // This is where the subtle election and commit-rule bugs (Raft paper, Figure 8) show up.
  return {
    ...base,
    storm: true,
    voters: rng.range(3, 5),
    learners: 0,
    preVote: rng.chance(0.5),
    maxMsgBytes: 48,
    maxInflightMsgs: rng.range(4, 8),
    pPropose: 0.6,
    pPartition: 0.03,
    pCrash: 0.01,
    pPause: 0.03,
    pauseMaxMs: 200,
    pNewLeaderFault: 0.5,
    pNewCandidateFault: 0.4,
    slowRate: 0.1,
    dupRate: 0.05,
  };
}
