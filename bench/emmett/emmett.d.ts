// The part of Emmett's API the peer server (bench/emmett/server.ts) uses. Declared here because
// Emmett lives in bench/emmett/node_modules, installed only by the bench's first peer run: the
// project's typecheck must pass without it (these declarations are what the checker uses either way;
// they follow @event-driven-io/emmett and emmett-sqlite 0.38.5's own .d.ts).

declare module '@event-driven-io/emmett' {
  type DefaultRecord = Record<string, unknown>;

  export type Event<EventType extends string = string, EventData extends DefaultRecord = DefaultRecord> = Readonly<{
    type: EventType;
    data: EventData;
    kind?: 'Event';
  }>;

  export type Command<CommandType extends string = string, CommandData extends DefaultRecord = DefaultRecord> = Readonly<{
    type: CommandType;
    data: CommandData;
    kind?: 'Command';
  }>;

  export type Decider<State, CommandType extends Command, StreamEvent extends Event> = {
    decide: (command: CommandType, state: State) => StreamEvent | StreamEvent[];
    evolve: (currentState: State, event: StreamEvent) => State;
    initialState: () => State;
  };

  export type AggregateStreamResult<State> = { currentStreamVersion: bigint; state: State; streamExists: boolean };

  export type AppendToStreamResultWithGlobalPosition = {
    nextExpectedStreamVersion: bigint;
    createdNewStream: boolean;
    lastEventGlobalPosition: bigint;
  };

  /** `event: never`: an evolve of any event type fits. */
  export type EventStore = {
    aggregateStream<State>(
      streamName: string,
      options: { evolve: (state: State, event: never) => State; initialState: () => State },
    ): Promise<AggregateStreamResult<State>>;
  };

  export type CommandHandlerResult<State, StreamEvent extends Event> = AppendToStreamResultWithGlobalPosition & {
    newState: State;
    newEvents: StreamEvent[];
  };

  export const DeciderCommandHandler: <State, CommandType extends Command, StreamEvent extends Event>(
    options: Decider<State, CommandType, StreamEvent> & { mapToStreamId?: (id: string) => string },
  ) => (eventStore: EventStore, id: string, commands: CommandType | CommandType[]) => Promise<CommandHandlerResult<State, StreamEvent>>;

  export class EmmettError extends Error {
    errorCode: number;
  }

  export class IllegalStateError extends EmmettError {
    constructor(message?: string);
  }
}

declare module '@event-driven-io/emmett-sqlite' {
  import type { EventStore } from '@event-driven-io/emmett';

  export type SQLiteConnection = {
    close: () => void;
    query: <T>(sql: string, values?: unknown[]) => Promise<T[]>;
    querySingle: <T>(sql: string, values?: unknown[]) => Promise<T | null>;
  };

  export type SQLiteEventStore = EventStore;

  export const getSQLiteEventStore: (options: {
    fileName: string;
    schema?: { autoMigration?: 'None' | 'CreateOrUpdate' };
  }) => SQLiteEventStore;

  export const sqliteConnection: (options: { fileName: string }) => SQLiteConnection;
}
