// Sharing: records shared with users and groups.

import type { Module } from '../../api/module.ts';
import { sharingRoutes } from './api/sharing.ts';
import { sharing } from './domain/sharing.ts';

export const sharingModule: Module = { name: 'sharing', resources: [{ definition: sharing }], routes: sharingRoutes };
