import './tracing';
import 'reflect-metadata';
import { runService } from '@mission/runtime';
import { missionServiceDefinition } from '@mission/service-mission';

runService(missionServiceDefinition);
