// What the application is built from (declared with the modules, api/module.ts).

export type { AppDeps } from './module.ts';
