import './tracing';
import 'reflect-metadata';
import { runService } from '@mission/runtime';
import { notificationServiceDefinition } from '@mission/service-notification';

runService(notificationServiceDefinition);
