// The read model of jobs: one document per job with its steps, folded from the streams of the job
// and of every step that names it (steps carry their jobId in every event). It serves job
// searches and GET /jobs/{id}?expand=JOB_STEPS.

import { job, jobStep } from '../domain/jobs.ts';
import type { Document } from '../../../domain/ports.ts';
import { evolve, fromRecord, initialState, kindOf, streamOf, toRecord, type ResourceRecord } from '../../../domain/resource/decider.ts';
import { idIn } from '../../../domain/shared/streams.ts';
import { multiStreamProjection, type Projection } from '../../../projections/projection.ts';

type JobDocument = Document & { jobSteps: ResourceRecord[] };

const stepsOf = (doc: Document | undefined): ResourceRecord[] => (doc?.jobSteps as ResourceRecord[] | undefined) ?? [];

export const jobsWithSteps: Projection = multiStreamProjection({
  name: job.collection,
  categories: [job.category, jobStep.category],
  indexedPaths: job.indexed,
  documentIds(event) {
    if (kindOf(job, event.type) !== undefined) {
      const id = idIn(job.category, event.stream);
      return id === undefined ? [] : [id];
    }
    if (kindOf(jobStep, event.type) !== undefined && typeof event.data.jobId === 'string') return [event.data.jobId];
    return [];
  },
  evolve(doc, event, id): JobDocument | null | undefined {
    if (kindOf(job, event.type) !== undefined) {
      const { jobSteps: _steps, ...record } = doc ?? { id };
      const after = evolve(job, doc === undefined ? initialState() : fromRecord(record), event);
      if (after.status === 'absent') return undefined;
      if (after.status === 'deleted') return null;
      return { ...toRecord(after), jobSteps: stepsOf(doc) };
    }
    // A step of a job this model has not seen (none can exist: a step's job exists first).
    if (doc === undefined) return undefined;
    const stepId = idIn(jobStep.category, event.stream);
    const steps = stepsOf(doc);
    const at = steps.findIndex((s) => s.id === stepId);
    const before = at < 0 ? initialState() : fromRecord(steps[at] as ResourceRecord);
    const after = evolve(jobStep, before, event);
    if (after.status === 'absent') return undefined;
    const next = [...steps];
    if (after.status === 'deleted') {
      if (at >= 0) next.splice(at, 1);
    } else if (at < 0) next.push(toRecord(after));
    else next[at] = toRecord(after);
    return { ...doc, jobSteps: next };
  },
  sourcesOf: (doc) => [streamOf(job, doc.id), ...stepsOf(doc).map((s) => streamOf(jobStep, s.id))],
});
