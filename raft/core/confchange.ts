/**
 * Membership changes (etcd's confchange.Changer): simple single-voter changes, entering a joint
 * configuration C_old,new, and leaving it. Every function works on copies and either returns a valid new
 * (config, progress) pair or throws ConfChangeError, leaving the input untouched.
 */
import type { ConfChange, ConfChangeSingle, ConfState, NodeId } from '../types.js';
import { Inflights, Progress } from './progress.js';
import { copyTrackerConfig, emptyTrackerConfig, ProgressTracker, type TrackerConfig } from './tracker.js';

export class ConfChangeError extends Error {
  constructor(message: string) {
    super(`raft: invalid configuration change: ${message}`);
    this.name = 'ConfChangeError';
  }
}

export interface ConfChangeResult {
  config: TrackerConfig;
  progress: Map<NodeId, Progress>;
}

/** True when `cc` leaves a joint configuration (no changes). */
export function isLeaveJoint(cc: ConfChange): boolean {
  return cc.changes.length === 0;
}

/** Joint consensus is used for several changes or when asked explicitly; autoLeave unless `transition: 'joint'`. */
export function entersJoint(cc: ConfChange): { joint: boolean; autoLeave: boolean } {
  if (cc.changes.length === 0) return { joint: false, autoLeave: false };
  if (cc.transition === 'joint') return { joint: true, autoLeave: false };
  return { joint: cc.changes.length > 1, autoLeave: true };
}

/** Computes the configuration that results from applying `cc` to `tracker` (which is not modified). */
export function computeConfChange(tracker: ProgressTracker, cc: ConfChange, lastIndex: number): ConfChangeResult {
  if (isLeaveJoint(cc)) return leaveJoint(tracker);
  const { joint, autoLeave } = entersJoint(cc);
  if (joint) return enterJoint(tracker, lastIndex, autoLeave, cc.changes);
  return simple(tracker, lastIndex, cc.changes);
}

function checkAndCopy(tracker: ProgressTracker): ConfChangeResult {
  const config = copyTrackerConfig(tracker.config);
  const progress = new Map<NodeId, Progress>();
  for (const [id, pr] of tracker.progress) progress.set(id, pr.clone());
  checkInvariants(config, progress);
  return { config, progress };
}

export function enterJoint(
  tracker: ProgressTracker,
  lastIndex: number,
  autoLeave: boolean,
  changes: ConfChangeSingle[],
): ConfChangeResult {
  const r = checkAndCopy(tracker);
  if (r.config.outgoing.size > 0) throw new ConfChangeError('configuration is already joint');
  if (r.config.incoming.size === 0) throw new ConfChangeError("can't make a zero-voter configuration joint");
  r.config.outgoing = new Set(r.config.incoming);
  applyChanges(r, lastIndex, tracker.maxInflight, changes);
  r.config.autoLeave = autoLeave;
  checkInvariants(r.config, r.progress);
  return r;
}

export function leaveJoint(tracker: ProgressTracker): ConfChangeResult {
  const r = checkAndCopy(tracker);
  if (r.config.outgoing.size === 0) throw new ConfChangeError("can't leave a non-joint configuration");
  for (const id of r.config.learnersNext) {
    r.config.learners.add(id);
    const pr = r.progress.get(id);
    if (!pr) throw new ConfChangeError(`no progress for staged learner ${id}`);
    pr.isLearner = true;
  }
  r.config.learnersNext.clear();
  for (const id of r.config.outgoing) {
    if (!r.config.incoming.has(id) && !r.config.learners.has(id)) r.progress.delete(id);
  }
  r.config.outgoing.clear();
  r.config.autoLeave = false;
  checkInvariants(r.config, r.progress);
  return r;
}

export function simple(tracker: ProgressTracker, lastIndex: number, changes: ConfChangeSingle[]): ConfChangeResult {
  const r = checkAndCopy(tracker);
  if (r.config.outgoing.size > 0) throw new ConfChangeError("can't apply a simple change in a joint configuration");
  applyChanges(r, lastIndex, tracker.maxInflight, changes);
  if (symdiff(tracker.config.incoming, r.config.incoming) > 1) {
    throw new ConfChangeError('more than one voter changed without entering a joint configuration');
  }
  checkInvariants(r.config, r.progress);
  return r;
}

function applyChanges(r: ConfChangeResult, lastIndex: number, maxInflight: number, changes: ConfChangeSingle[]): void {
  for (const cc of changes) {
    if (typeof cc.node !== 'string' || cc.node.length === 0) throw new ConfChangeError('empty node id');
    switch (cc.type) {
      case 'addVoter':
        makeVoter(r, lastIndex, maxInflight, cc.node);
        break;
      case 'addLearner':
        makeLearner(r, lastIndex, maxInflight, cc.node);
        break;
      case 'removeNode':
        remove(r, cc.node);
        break;
      default:
        throw new ConfChangeError(`unknown change type ${String((cc as { type: unknown }).type)}`);
    }
  }
  if (r.config.incoming.size === 0) throw new ConfChangeError('removed all voters');
}

function makeVoter(r: ConfChangeResult, lastIndex: number, maxInflight: number, id: NodeId): void {
  const pr = r.progress.get(id);
  if (!pr) {
    initProgress(r, lastIndex, maxInflight, id, false);
    return;
  }
  pr.isLearner = false;
  r.config.learners.delete(id);
  r.config.learnersNext.delete(id);
  r.config.incoming.add(id);
}

function makeLearner(r: ConfChangeResult, lastIndex: number, maxInflight: number, id: NodeId): void {
  const pr = r.progress.get(id);
  if (!pr) {
    initProgress(r, lastIndex, maxInflight, id, true);
    return;
  }
  if (pr.isLearner) return;
  // Demote: drop it as a voter of the incoming config but keep its progress.
  remove(r, id);
  r.progress.set(id, pr);
  if (r.config.outgoing.has(id)) {
    // Still a voter in the outgoing config: becomes a learner when the joint config is left.
    r.config.learnersNext.add(id);
  } else {
    pr.isLearner = true;
    r.config.learners.add(id);
  }
}

function remove(r: ConfChangeResult, id: NodeId): void {
  if (!r.progress.has(id)) return;
  r.config.incoming.delete(id);
  r.config.learners.delete(id);
  r.config.learnersNext.delete(id);
  if (!r.config.outgoing.has(id)) r.progress.delete(id);
}

function initProgress(
  r: ConfChangeResult,
  lastIndex: number,
  maxInflight: number,
  id: NodeId,
  isLearner: boolean,
): void {
  if (isLearner) r.config.learners.add(id);
  else r.config.incoming.add(id);
  // Probe from the last index; the follower's rejection hint quickly walks it back.
  const pr = new Progress(Math.max(lastIndex, 1), new Inflights(maxInflight), isLearner);
  // A new member counts as recently active so check-quorum does not fire before it had a chance to respond.
  pr.recentActive = true;
  r.progress.set(id, pr);
}

function symdiff(a: ReadonlySet<NodeId>, b: ReadonlySet<NodeId>): number {
  let n = 0;
  for (const id of a) if (!b.has(id)) n++;
  for (const id of b) if (!a.has(id)) n++;
  return n;
}

/** Configuration and progress must be mutually consistent; throws ConfChangeError otherwise. */
export function checkInvariants(config: TrackerConfig, progress: ReadonlyMap<NodeId, Progress>): void {
  for (const set of [config.incoming, config.outgoing, config.learners, config.learnersNext]) {
    for (const id of set) if (!progress.has(id)) throw new ConfChangeError(`no progress for ${id}`);
  }
  for (const id of config.learnersNext) {
    if (!config.outgoing.has(id)) throw new ConfChangeError(`${id} is in learnersNext but not an outgoing voter`);
    if (progress.get(id)?.isLearner) throw new ConfChangeError(`${id} is in learnersNext but already a learner`);
  }
  for (const id of config.learners) {
    if (config.outgoing.has(id)) throw new ConfChangeError(`${id} is a learner and an outgoing voter`);
    if (config.incoming.has(id)) throw new ConfChangeError(`${id} is a learner and a voter`);
    if (!progress.get(id)?.isLearner) throw new ConfChangeError(`${id} is a learner but not marked as one`);
  }
  if (config.outgoing.size === 0) {
    if (config.learnersNext.size > 0) throw new ConfChangeError('learnersNext must be empty when not joint');
    if (config.autoLeave) throw new ConfChangeError('autoLeave must be false when not joint');
  }
}

/** Builds a tracker from a persisted ConfState (etcd's confchange.Restore). */
export function restoreTracker(cs: ConfState, lastIndex: number, maxInflight: number): ProgressTracker {
  const config = emptyTrackerConfig();
  const progress = new Map<NodeId, Progress>();
  const add = (id: NodeId, isLearner: boolean) => {
    if (!progress.has(id)) {
      const pr = new Progress(Math.max(lastIndex, 1), new Inflights(maxInflight), isLearner);
      pr.recentActive = true;
      progress.set(id, pr);
    }
  };
  for (const id of cs.voters) {
    config.incoming.add(id);
    add(id, false);
  }
  for (const id of cs.votersOutgoing) {
    config.outgoing.add(id);
    add(id, false);
  }
  for (const id of cs.learners) {
    config.learners.add(id);
    add(id, true);
  }
  for (const id of cs.learnersNext) {
    config.learnersNext.add(id);
    add(id, false);
  }
  config.autoLeave = cs.autoLeave && config.outgoing.size > 0;
  checkInvariants(config, progress);
  return new ProgressTracker(config, progress, maxInflight);
}
