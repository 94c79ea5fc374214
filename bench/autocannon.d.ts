// The part of autocannon's API the benchmark uses (the package ships no types).

declare module 'autocannon' {
  export type RequestParams = { method?: string; path?: string; headers?: Record<string, string>; body?: string };

  export type Request = RequestParams & {
    setupRequest?: (request: RequestParams, context: Record<string, unknown>) => RequestParams;
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void;
  };

  export type Options = {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    pipelining?: number;
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    requests?: Request[];
    setupClient?: (client: unknown) => void;
  };

  export type Histogram = {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
    p99_9: number;
  };

  export type Result = {
    duration: number;
    latency: Histogram;
    requests: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    '4xx': number;
    '5xx': number;
  };

  type Instance = PromiseLike<Result> & { stop(): void };

  export default function autocannon(options: Options): Instance;
}
