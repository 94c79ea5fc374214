// A gRPC STAND-IN FOR A KURRENTDB SERVER, not a KurrentDB: the protocol a 21.10+ server speaks to
// @kurrent/kurrentdb-client (the client's own generated service definitions), served over loopback
// by gRPC-js, with the in-memory model of inMemoryClient.ts as its storage. It advertises BatchAppend
// in its server-features answer, as every server since 21.10 does, so the REAL client runs its
// production paths against it: appends through its batch-append stream, reads through its Rust
// reader. It answers as KurrentDB's own code does (src/KurrentDB.Core/Services/Transport/Grpc:
// Streams.BatchAppend.cs, Status.cs, RpcExceptions.cs, Streams.Read.cs): a refused append as a
// BatchAppendResp error whose details name the reason (or, for a busy or not-ready server, a bare
// google.protobuf.Empty and a message), the whole append checked against MaxAppendSize and each
// event against MaxAppendEventSize as the server measures them, a deleted stream's read as
// FailedPrecondition with `exception: stream-deleted`, $all refused to a user without access. A
// test makes a chosen append or read fail with a StandInFault through the model's gates, holds
// commits, or makes every call fail with one gRPC status (a failing server).

import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import { Any } from 'google-protobuf/google/protobuf/any_pb.js';
import { Empty as ProtobufEmpty } from 'google-protobuf/google/protobuf/empty_pb.js';
import {
  ANY,
  AccessDeniedError,
  BACKWARDS,
  DeadlineExceededError,
  END,
  FORWARDS,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  StreamDeletedError,
  StreamNotFoundError,
  UnavailableError,
  WrongExpectedVersionError,
  jsonEvent,
  type AllStreamRecordedEvent,
  type AppendStreamState,
  type EventData,
  type Filter,
  type ReadAllOptions,
  type ReadStreamOptions,
} from '@kurrent/kurrentdb-client';
import type * as StreamsPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_pb.js';
import type * as StreamsGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/streams_grpc_pb.js';
import type * as SharedPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/shared_pb.js';
import type * as StatusPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/status_pb.js';
import type * as FeaturesPb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/serverfeatures_pb.js';
import type * as FeaturesGrpc from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/serverfeatures_grpc_pb.js';
import type * as CodePb from '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1/code_pb.js';
import { InMemoryKurrentClient, type InMemoryClientOptions } from './inMemoryClient.ts';

// The generated modules are CommonJS that Node's ESM loader cannot see the names of.
const load = createRequire(import.meta.url);
const generated = '@kurrent/kurrentdb-client/generated/kurrentdb/protocols/v1';
const streamsPb = load(`${generated}/streams_pb.js`) as typeof StreamsPb;
const streamsGrpc = load(`${generated}/streams_grpc_pb.js`) as typeof StreamsGrpc;
const sharedPb = load(`${generated}/shared_pb.js`) as typeof SharedPb;
const statusPb = load(`${generated}/status_pb.js`) as typeof StatusPb;
const featuresPb = load(`${generated}/serverfeatures_pb.js`) as typeof FeaturesPb;
const featuresGrpc = load(`${generated}/serverfeatures_grpc_pb.js`) as typeof FeaturesGrpc;
const { Code } = load(`${generated}/code_pb.js`) as typeof CodePb;

/** A failure the stand-in answers as the server would: pass one to a gate's `fail()`. */
export class StandInFault extends Error {
  readonly kind: StandInFaultKind;
  constructor(kind: StandInFaultKind) {
    super(`stand-in fault: ${kind}`);
    this.kind = kind;
  }
}
/** busy, notReady: a NotHandled of the server's queue; unknown: an append result the server does
 * not map (Status.Unknown); timeout: a commit timeout (Status.Timeout); accessDenied. */
export type StandInFaultKind = 'busy' | 'notReady' | 'unknown' | 'timeout' | 'accessDenied';

export type GrpcStandInOptions = InMemoryClientOptions & {
  /** KurrentDB's MaxAppendSize (bytes of one whole append, as the server counts them): 1 MiB up to 25.x. */
  maxAppendSize?: number;
  /** KurrentDB's MaxAppendEventSize (25.1 and later; unlimited before). */
  maxAppendEventSize?: number;
  /** False refuses reads of $all, as the server does to a user outside $admins and $ops. */
  allowsAll?: boolean;
  /** Every call but the server-features probe fails with this gRPC status (a failing server). */
  failEveryCall?: { status: grpc.status; message: string };
};

export type GrpcStandIn = {
  /** A connection string for the real client; `query` is appended (e.g. `throwOnAppendFailure=false`). */
  url(query?: string): string;
  /** The storage, with its gates, event lists and controls. */
  model: InMemoryKurrentClient;
  close(): Promise<void>;
};

const ONE_MIB = 1024 * 1024;

/** Starts a stand-in on a free loopback port. */
export async function startGrpcStandIn(options: GrpcStandInOptions = {}): Promise<GrpcStandIn> {
  const model = new InMemoryKurrentClient(options);
  const server = new grpc.Server();
  const failing = options.failEveryCall;
  const fail = (callback: (error: grpc.ServiceError | null) => void): boolean => {
    if (failing === undefined) return false;
    callback(Object.assign(new Error(failing.message), { code: failing.status, details: failing.message, metadata: new grpc.Metadata() }));
    return true;
  };
  server.addService(featuresGrpc.ServerFeaturesService, {
    getSupportedMethods: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<FeaturesPb.SupportedMethods>) => {
      callback(null, supportedMethods());
    },
  });
  server.addService(streamsGrpc.StreamsService, {
    read: (call: grpc.ServerWritableStream<StreamsPb.ReadReq, StreamsPb.ReadResp>) => {
      if (fail((e) => call.emit('error', e))) return;
      void serveRead(model, options, call);
    },
    batchAppend: (call: grpc.ServerDuplexStream<StreamsPb.BatchAppendReq, StreamsPb.BatchAppendResp>) => {
      if (fail((e) => call.emit('error', e))) return;
      serveBatchAppend(model, options, call);
    },
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => {
      if (error) reject(error);
      else resolve(bound);
    });
  });
  return {
    url: (query) => `kurrentdb://127.0.0.1:${String(port)}?tls=false${query === undefined ? '' : `&${query}`}`,
    model,
    close: () => {
      server.forceShutdown();
      return Promise.resolve();
    },
  };
}

/** What a 25.0 server advertises of the calls the adapter makes. */
function supportedMethods(): FeaturesPb.SupportedMethods {
  const answer = new featuresPb.SupportedMethods();
  answer.setEventStoreServerVersion('25.0.0');
  for (const name of ['read', 'append', 'batchappend', 'delete', 'tombstone']) {
    const method = new featuresPb.SupportedMethod();
    method.setServiceName('event_store.client.streams.streams');
    method.setMethodName(name);
    answer.addMethods(method);
  }
  return answer;
}

// ---------------------------------------------------------------------------------------------
// Appends

/** The size KurrentDB counts for an event against its limits (Event.SizeOnDisk): data, metadata
 * and the type's UTF-16 length twice. */
export const sizeOnDisk = (type: string, data: Uint8Array, metadata: Uint8Array): number => data.length + metadata.length + type.length * 2;

type PendingAppend = { stream: string; streamState: AppendStreamState; deadline: number | undefined; events: EventData[]; size: number };

function serveBatchAppend(
  model: InMemoryKurrentClient,
  options: GrpcStandInOptions,
  call: grpc.ServerDuplexStream<StreamsPb.BatchAppendReq, StreamsPb.BatchAppendResp>,
): void {
  const pending = new Map<string, PendingAppend>();
  const maxAppendSize = options.maxAppendSize ?? ONE_MIB;
  const maxEventSize = options.maxAppendEventSize ?? Number.MAX_SAFE_INTEGER;
  call.on('error', () => undefined);
  call.on('data', (request: StreamsPb.BatchAppendReq) => {
    const correlation = request.getCorrelationId()?.getString() ?? '';
    const requestOptions = request.getOptions();
    if (requestOptions !== undefined) pending.set(correlation, startAppend(requestOptions));
    const append = pending.get(correlation);
    if (append === undefined) return;
    const answer = (error: StatusPb.Status | undefined, success?: StreamsPb.BatchAppendResp.Success) => {
      const response = new streamsPb.BatchAppendResp();
      response.setCorrelationId(uuid(correlation));
      response.setStreamIdentifier(streamIdentifier(append.stream));
      if (error !== undefined) response.setError(error);
      if (success !== undefined) response.setSuccess(success);
      call.write(response);
    };
    for (const message of request.getProposedMessagesList()) {
      const event = eventOf(message);
      const size = sizeOnDisk(event.type, bytes(message.getData()), bytes(message.getCustomMetadata()));
      if (size > maxEventSize) {
        pending.delete(correlation);
        answer(
          status(
            Code.INVALID_ARGUMENT,
            'MaximumAppendEventSizeExceeded',
            packed('event_store.client.MaximumAppendEventSizeExceeded', maxEventSizeDetails(event.id, size, maxEventSize)),
          ),
        );
        return;
      }
      append.size += size;
      append.events.push(event);
    }
    if (append.size > maxAppendSize) {
      pending.delete(correlation);
      const details = new sharedPb.MaximumAppendSizeExceeded();
      details.setMaxappendsize(maxAppendSize);
      answer(
        status(
          Code.INVALID_ARGUMENT,
          'MaximumAppendSizeExceeded',
          packed('event_store.client.MaximumAppendSizeExceeded', details.serializeBinary()),
        ),
      );
      return;
    }
    if (!request.getIsFinal()) return;
    pending.delete(correlation);
    model
      .appendToStream(append.stream, append.events, {
        streamState: append.streamState,
        ...(append.deadline === undefined ? {} : { deadline: append.deadline }),
      })
      .then(
        (result) => {
          const success = new streamsPb.BatchAppendResp.Success();
          success.setCurrentRevision(result.nextExpectedRevision.toString());
          if (result.position === undefined) success.setNoPosition(new ProtobufEmpty());
          else success.setPosition(allPosition(result.position.commit, result.position.prepare));
          // The model answers a refused append as success: false only when told to (the client's
          // option, which the real client applies itself): here it always throws.
          answer(undefined, success);
        },
        (error: unknown) => {
          // A dropped connection fails every append under way on the batch-append call.
          if (error instanceof UnavailableError) call.emit('error', grpcError(grpc.status.UNAVAILABLE, 'connection lost'));
          else answer(appendError(error, append));
        },
      );
  });
  call.on('end', () => call.end());
}

function startAppend(o: StreamsPb.BatchAppendReq.Options): PendingAppend {
  const stream = streamName(o.getStreamIdentifier());
  const streamState: AppendStreamState = o.hasStreamPosition()
    ? BigInt(o.getStreamPosition())
    : o.hasNoStream()
      ? NO_STREAM
      : o.hasStreamExists()
        ? STREAM_EXISTS
        : ANY;
  const at = o.getDeadline21100()?.toDate().getTime();
  return { stream, streamState, deadline: at === undefined ? undefined : Math.max(0, at - Date.now()), events: [], size: 0 };
}

function eventOf(message: StreamsPb.BatchAppendReq.ProposedMessage): EventData {
  const meta = message.getMetadataMap();
  const type = meta.get('type') ?? '';
  const contentType = meta.get('content-type') ?? 'application/octet-stream';
  const data = bytes(message.getData());
  const metadata = bytes(message.getCustomMetadata());
  const id = message.getId()?.getString() ?? '';
  if (contentType !== 'application/json') return { id, type, contentType: 'application/octet-stream', data, metadata };
  const text = (b: Uint8Array): unknown => (b.length === 0 ? undefined : JSON.parse(Buffer.from(b).toString('utf8')));
  return jsonEvent({
    id,
    type,
    data: text(data) as Record<string, unknown>,
    metadata: text(metadata) as Record<string, unknown> | undefined,
  });
}

/** An append's failure as Streams.BatchAppend.cs answers it. */
function appendError(error: unknown, append: PendingAppend): StatusPb.Status {
  if (error instanceof WrongExpectedVersionError) {
    const details = new sharedPb.WrongExpectedVersion();
    if (typeof error.actualState === 'bigint') details.setCurrentStreamRevision(error.actualState.toString());
    else details.setCurrentNoStream(new ProtobufEmpty());
    if (typeof append.streamState === 'bigint') details.setExpectedStreamPosition(append.streamState.toString());
    else if (append.streamState === NO_STREAM) details.setExpectedNoStream(new ProtobufEmpty());
    else if (append.streamState === STREAM_EXISTS) details.setExpectedStreamExists(new ProtobufEmpty());
    else details.setExpectedAny(new ProtobufEmpty());
    return status(
      Code.ALREADY_EXISTS,
      'WrongExpectedVersion',
      packed('event_store.client.WrongExpectedVersion', details.serializeBinary()),
    );
  }
  if (error instanceof StreamDeletedError) {
    const details = new sharedPb.StreamDeleted();
    details.setStreamIdentifier(streamIdentifier(append.stream));
    return status(Code.NOT_FOUND, 'StreamDeleted', packed('event_store.client.StreamDeleted', details.serializeBinary()));
  }
  switch (faultOf(error)) {
    // NotHandled: no code, a bare Empty, the reason in the message.
    case 'busy':
      return status(Code.OK, 'Server Is Busy', packed('google.protobuf.Empty', new ProtobufEmpty().serializeBinary()));
    case 'notReady':
      return status(Code.OK, 'Server Is Not Ready', packed('google.protobuf.Empty', new ProtobufEmpty().serializeBinary()));
    case 'timeout':
      return status(Code.DEADLINE_EXCEEDED, 'Timeout', packed('event_store.client.Timeout', new sharedPb.Timeout().serializeBinary()));
    case 'accessDenied':
      return status(
        Code.PERMISSION_DENIED,
        'AccessDenied',
        packed('event_store.client.AccessDenied', new sharedPb.AccessDenied().serializeBinary()),
      );
    case 'unknown':
      return status(Code.UNKNOWN, 'Unknown', packed('event_store.client.Unknown', new sharedPb.Unknown().serializeBinary()));
  }
}

/** The fault a test's error stands for: a StandInFault, or one of the client's own errors. */
function faultOf(error: unknown): StandInFaultKind {
  if (error instanceof StandInFault) return error.kind;
  if (error instanceof DeadlineExceededError) return 'timeout';
  if (error instanceof AccessDeniedError) return 'accessDenied';
  return 'unknown';
}

/** shared.proto's MaximumAppendEventSizeExceeded (newer than the client, which has no class for it). */
function maxEventSizeDetails(eventId: string, size: number, max: number): Uint8Array {
  const text = Buffer.from(eventId, 'utf8');
  const varint = (n: number): number[] => {
    const out: number[] = [];
    let v = n;
    while (v > 0x7f) {
      out.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(v);
    return out;
  };
  return Uint8Array.from([0x0a, ...varint(text.length), ...text, 0x10, ...varint(size), 0x18, ...varint(max)]);
}

function status(code: CodePb.Code, message: string, details: Any): StatusPb.Status {
  const s = new statusPb.Status();
  s.setCode(code);
  s.setMessage(message);
  s.setDetails(details);
  return s;
}

function packed(typeName: string, serialized: Uint8Array): Any {
  const any = new Any();
  any.pack(serialized, typeName);
  return any;
}

// ---------------------------------------------------------------------------------------------
// Reads

async function serveRead(
  model: InMemoryKurrentClient,
  options: GrpcStandInOptions,
  call: grpc.ServerWritableStream<StreamsPb.ReadReq, StreamsPb.ReadResp>,
): Promise<void> {
  const o = call.request.getOptions();
  if (o === undefined || o.hasSubscription()) {
    call.emit('error', grpcError(grpc.status.UNIMPLEMENTED, 'subscriptions are not part of the stand-in'));
    return;
  }
  const backwards = o.getReadDirection() === streamsPb.ReadReq.Options.ReadDirection.BACKWARDS;
  const maxCount = BigInt(o.getCount());
  const requiresLeader = call.metadata.get('requires-leader').some((v) => String(v) === 'true');
  const stream = o.getStream();
  try {
    if (stream !== undefined) {
      const name = streamName(stream.getStreamIdentifier());
      const fromRevision = stream.hasRevision() ? BigInt(stream.getRevision()) : stream.hasEnd() ? END : START;
      const read: ReadStreamOptions = { direction: backwards ? BACKWARDS : FORWARDS, fromRevision, maxCount, requiresLeader };
      for await (const resolved of model.readStream(name, read))
        if (resolved.event) call.write(readEvent(resolved.event as AllStreamRecordedEvent));
    } else {
      if (options.allowsAll === false) throw new StandInFault('accessDenied');
      const all = o.getAll();
      const position = all?.getPosition();
      const fromPosition =
        position === undefined
          ? all?.hasEnd() === true
            ? END
            : START
          : { commit: BigInt(position.getCommitPosition()), prepare: BigInt(position.getPreparePosition()) };
      const read: ReadAllOptions = { direction: backwards ? BACKWARDS : FORWARDS, fromPosition, maxCount, requiresLeader, ...filterOf(o) };
      for await (const resolved of model.readAll(read)) if (resolved.event) call.write(readEvent(resolved.event));
    }
    call.end();
  } catch (error) {
    if (error instanceof StreamNotFoundError) {
      const notFound = new streamsPb.ReadResp.StreamNotFound();
      notFound.setStreamIdentifier(streamIdentifier(stream === undefined ? '' : streamName(stream.getStreamIdentifier())));
      const response = new streamsPb.ReadResp();
      response.setStreamNotFound(notFound);
      call.write(response);
      call.end();
      return;
    }
    call.emit('error', readError(error));
  }
}

function filterOf(o: StreamsPb.ReadReq.Options): { filter?: Filter } {
  const expression = o.getFilter()?.getStreamIdentifier();
  if (expression === undefined) return {};
  const prefixes = expression.getPrefixList();
  return {
    filter: prefixes.length > 0 ? { filterOn: 'streamName', prefixes } : { filterOn: 'streamName', regex: expression.getRegex() },
  } as { filter: Filter };
}

/** A read's failure as Streams.Read.cs and RpcExceptions.cs answer it. */
function readError(error: unknown): grpc.ServiceError {
  if (error instanceof StreamDeletedError) {
    return grpcError(grpc.status.FAILED_PRECONDITION, `Event stream '${error.streamName}' is deleted.`, {
      exception: 'stream-deleted',
      'stream-name': error.streamName,
    });
  }
  if (error instanceof UnavailableError) return grpcError(grpc.status.UNAVAILABLE, 'connection lost');
  switch (faultOf(error)) {
    case 'busy':
      return grpcError(grpc.status.UNAVAILABLE, 'Server Is Too Busy');
    case 'notReady':
      return grpcError(grpc.status.UNAVAILABLE, 'Server Is Not Ready');
    case 'timeout':
      return grpcError(grpc.status.ABORTED, 'Operation timed out: read');
    case 'accessDenied':
      return grpcError(grpc.status.PERMISSION_DENIED, 'Access Denied', { exception: 'access-denied' });
    case 'unknown':
      return grpcError(grpc.status.UNKNOWN, error instanceof Error ? error.message : String(error));
  }
}

function grpcError(code: grpc.status, message: string, metadata: Record<string, string> = {}): grpc.ServiceError {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) m.set(k, v);
  return Object.assign(new Error(message), { code, details: message, metadata: m });
}

/** An event as the server sends it: `created` in .NET ticks since the epoch. */
function readEvent(e: AllStreamRecordedEvent): StreamsPb.ReadResp {
  const recorded = new streamsPb.ReadResp.ReadEvent.RecordedEvent();
  recorded.setId(uuid(e.id));
  recorded.setStreamIdentifier(streamIdentifier(e.streamId));
  recorded.setStreamRevision(e.revision.toString());
  recorded.setCommitPosition(e.position.commit.toString());
  recorded.setPreparePosition(e.position.prepare.toString());
  const meta = recorded.getMetadataMap();
  meta.set('type', e.type);
  meta.set('content-type', e.isJson ? 'application/json' : 'application/octet-stream');
  meta.set('created', (BigInt(e.created.getTime()) * 10_000n).toString());
  const encode = (v: unknown): Uint8Array =>
    v === undefined ? new Uint8Array() : v instanceof Uint8Array ? v : Buffer.from(JSON.stringify(v), 'utf8');
  recorded.setData(encode(e.data));
  recorded.setCustomMetadata(encode(e.metadata));
  const read = new streamsPb.ReadResp.ReadEvent();
  read.setEvent(recorded);
  read.setCommitPosition(e.position.commit.toString());
  const response = new streamsPb.ReadResp();
  response.setEvent(read);
  return response;
}

// ---------------------------------------------------------------------------------------------
// Wire values

const bytes = (v: Uint8Array | string): Uint8Array => (typeof v === 'string' ? Buffer.from(v, 'base64') : v);

function uuid(id: string): SharedPb.UUID {
  const u = new sharedPb.UUID();
  u.setString(id);
  return u;
}

function streamIdentifier(name: string): SharedPb.StreamIdentifier {
  const s = new sharedPb.StreamIdentifier();
  s.setStreamName(Buffer.from(name, 'utf8'));
  return s;
}

const streamName = (s: SharedPb.StreamIdentifier | undefined): string => Buffer.from(bytes(s?.getStreamName() ?? '')).toString('utf8');

function allPosition(commit: bigint, prepare: bigint): SharedPb.AllStreamPosition {
  const p = new sharedPb.AllStreamPosition();
  p.setCommitPosition(commit.toString());
  p.setPreparePosition(prepare.toString());
  return p;
}
